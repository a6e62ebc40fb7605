from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentrt._driver._lines import LineSplitter, LineTooLong


def split_all(chunks: list[bytes], cap: int = 1 << 20) -> list[bytes]:
    splitter = LineSplitter(cap)
    lines = [line for chunk in chunks for line in splitter.feed(chunk)]
    if rest := splitter.finish():
        lines.append(rest)
    return lines


@given(
    lines=st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=20),
    terminated=st.booleans(),
    cuts=st.lists(st.integers(min_value=0, max_value=2000), max_size=30),
)
def test_any_chunking_gives_the_same_lines(
    lines: list[bytes], terminated: bool, cuts: list[int]
) -> None:
    data = b"\n".join(lines) + (b"\n" if terminated and lines else b"")
    points = sorted({c for c in cuts if c < len(data)} | {0, len(data)})
    chunks = [data[a:b] for a, b in itertools.pairwise(points)]
    # An unterminated empty last line is no line at all.
    expected = lines if terminated or not lines or lines[-1] else lines[:-1]
    assert split_all(chunks) == split_all([data]) == expected


def test_a_line_of_exactly_the_cap_passes_one_more_byte_fails() -> None:
    assert split_all([b"x" * 10 + b"\n"], cap=10) == [b"x" * 10]
    with pytest.raises(LineTooLong) as info:
        split_all([b"x" * 11 + b"\n"], cap=10)
    assert (info.value.size, info.value.limit) == (11, 10)


def test_an_unterminated_line_is_refused_as_soon_as_it_crosses_the_cap() -> None:
    splitter = LineSplitter(100)
    assert splitter.feed(b"a\n" + b"y" * 60) == [b"a"]
    with pytest.raises(LineTooLong) as info:
        splitter.feed(b"y" * 60)  # no newline yet: the cap is enforced on the partial line
    assert info.value.size == 120


def test_lines_spanning_many_chunks_are_joined() -> None:
    splitter = LineSplitter(1 << 20)
    out: list[bytes] = []
    for _ in range(100):
        out += splitter.feed(b"z" * 1000)
    out += splitter.feed(b"\nnext\n")
    assert out == [b"z" * 100_000, b"next"]
    assert splitter.finish() == b""

"""Events: the kinds are closed. Response: a text kept as UTF-8 until read behaves as the str
it stands for."""

from __future__ import annotations

import copy
import pickle
import sys
from typing import Any

import attrs
import pytest
from traced import held_after

from agentrt import Event, EventCoverage, Response, ResultEvent, StopReason, TextEvent
from agentrt._events import AnyEvent, response_with_text, text_size

TEXT = "Grüße, 世界 \U0001f600 and a lone \ud800 surrogate"


def fields(**changes: Any) -> dict[str, Any]:
    terminal = ResultEvent(text="done", session_id="s1")
    base: dict[str, Any] = dict(
        final_message="done",
        events=(terminal,),
        terminal=terminal,
        event_coverage=EventCoverage(
            mode="compact", observed=1, retained=1, omitted=0, retained_bytes=40
        ),
        usage=None,
        cost_usd=0.5,
        duration=1.25,
        num_turns=1,
        session_id="s1",
        model="m",
        stop_reason=StopReason.COMPLETE,
    )
    return base | changes


def lazy() -> Response:
    return response_with_text(TEXT.encode("utf-8", "surrogatepass"), **fields())


def test_a_utf8_text_reads_as_its_str() -> None:
    response = lazy()
    assert text_size(response) == len(TEXT.encode("utf-8", "surrogatepass"))
    assert response.text == TEXT and type(response.text) is str
    assert response.text is response.text  # decoded once
    assert text_size(response) == len(TEXT.encode("utf-8", "surrogatepass"))
    assert response_with_text(TEXT, **fields()).text is TEXT


def test_equality_hash_and_repr_are_those_of_the_str() -> None:
    plain = Response(text=TEXT, **fields())
    assert lazy() == plain and plain == lazy()
    assert hash(lazy()) == hash(plain)
    assert repr(lazy()) == repr(plain)
    assert lazy() != Response(text=TEXT + "!", **fields())
    assert lazy() != response_with_text(b"other", **fields())


def test_pickle_copy_and_evolve_see_the_str() -> None:
    plain = Response(text=TEXT, **fields())
    for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
        back = pickle.loads(pickle.dumps(lazy(), protocol))
        assert back == plain and back.text == TEXT
        assert pickle.loads(pickle.dumps(back, protocol)) == plain
    assert pickle.dumps(pickle.loads(pickle.dumps(lazy()))) == pickle.dumps(plain)  # as a str
    assert copy.copy(lazy()) == plain and copy.deepcopy(lazy()) == plain
    assert copy.deepcopy(lazy())._text == TEXT  # the copy holds the str
    assert attrs.evolve(lazy(), cost_usd=1.0).text == TEXT
    assert attrs.evolve(lazy(), text="x") == Response(text="x", **fields())
    # The field is private (the property reads it); its keyword is the public name.
    assert (attrs.fields(Response)[0].name, attrs.fields(Response)[0].alias) == ("_text", "text")


def test_still_frozen() -> None:
    response = lazy()
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        response.text = "x"  # type: ignore[misc]
    assert response.text == TEXT


def utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


@pytest.mark.parametrize(
    "text",
    [
        "plain ASCII " * 5000,  # as small either way
        "mostly ASCII, one emoji \U0001f600 " * 2000,  # a str of 4 bytes a character
        "mostly ASCII → arrows " * 2000,  # 2 bytes a character as a str
        "世界和平" * 10_000,  # CJK: 3 bytes a character as UTF-8, 2 as a str
        "é" * 50_000,  # Latin-1: 2 bytes a character as UTF-8, 1 as a str
    ],
)
def test_the_text_is_kept_in_its_smaller_form(text: str) -> None:
    size, others = len(utf8(text)), fields()
    response, held = held_after(lambda: response_with_text(utf8(text), **others))
    # + the Response itself (192 bytes), and up to a KiB of the call's temporaries: what
    # they free into a free list that was not full (tuples, dicts) stays allocated for
    # tracemalloc, and how full those lists are depends on the tests run before (264 bytes
    # more, now and then). The two forms differ by tens of KB.
    assert held <= min(sys.getsizeof(text), size + 100) + 1024
    assert text_size(response) == size and response.text == text


@pytest.mark.parametrize("kind", [Event, *AnyEvent.__args__])
def test_no_event_kind_can_be_subclassed_outside_agentrt(kind: type[Event]) -> None:
    # The turn tells events apart by exact class: a subclass would be handled as none of
    # the kinds (a TextEvent subclass's text was not in Response.text).
    with pytest.raises(TypeError, match=f"subclasses agentrt's {kind.__name__}"):

        class Mine(kind, frozen=True, kw_only=True, tag="mine"):  # type: ignore[misc,valid-type]
            pass


def test_the_kinds_are_the_ones_retention_decodes() -> None:
    # Every kind agentrt defines is in AnyEvent (the classes refused above may linger in
    # __subclasses__ until collected).
    kinds = {kind for kind in Event.__subclasses__() if kind.__module__ != __name__}
    assert kinds == set(AnyEvent.__args__)
    assert TextEvent(text="t").kind == "text"

"""`agentrt._backends`' own unit test: a backend found by its name in the entry-point group,
the shipped ones without reading any distribution's metadata. Naming a backend to
start_agent is tested through the public API in tests/test_runtime.py."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import EntryPoint, EntryPoints

import pytest
from trio.testing import MockClock

from agentrt import Agent, BackendNotFound, InvalidOptions, _backends, open_runtime


@pytest.fixture
def entry_points(monkeypatch: pytest.MonkeyPatch) -> None:
    group = EntryPoints(
        [
            EntryPoint("fake", "agentrt.testing:ScriptedBackend", _backends.GROUP),
            EntryPoint("broken", "agentrt_no_such_module:Backend", _backends.GROUP),
        ]
    )
    monkeypatch.setattr(_backends, "_entry_points", lambda group: group_of(group))
    monkeypatch.setattr(_backends, "_loaded", {})

    def group_of(name: str) -> EntryPoints:
        assert name == _backends.GROUP
        return group


@pytest.mark.usefixtures("entry_points")
async def test_backends_are_found_by_entry_point_name(autojump_clock: MockClock) -> None:
    async with open_runtime() as rt:
        handle = await rt.start_agent(Agent, name="a", backend="fake")
        assert handle.backend == "scripted"
        assert _backends.resolve_backend("fake") is _backends.resolve_backend("fake")
        with pytest.raises(BackendNotFound) as info:
            await rt.start_agent(Agent, name="b", backend="nope")
        assert info.value.known == tuple(sorted({"broken", "fake", *_backends.SHIPPED}))
        with pytest.raises(InvalidOptions) as bad:
            await rt.start_agent(Agent, name="c", backend="broken")
        assert bad.value.key == "backend"
        assert isinstance(bad.value.__cause__, ImportError)
        assert rt.agents() == ("a",)


def test_the_shipped_backends_are_their_entry_points() -> None:
    from importlib.metadata import entry_points

    declared = {
        entry.name: entry.value
        for entry in entry_points(group=_backends.GROUP)
        if entry.dist is not None and entry.dist.name == "agentrt"
    }
    assert declared == _backends.SHIPPED


def test_a_shipped_backend_is_found_without_importlib_metadata() -> None:
    # A fresh interpreter: what `import agentrt` and `backend="claude"` import.
    code = (
        "import sys, agentrt\n"
        "from agentrt._backends import resolve_backend\n"
        "backends = [resolve_backend('claude'), resolve_backend('codex')]\n"
        "print([type(b).__name__ for b in backends], 'importlib.metadata' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["['ClaudeBackend',", "'CodexBackend']", "False"]

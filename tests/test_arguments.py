"""Bad input gets a clear, typed error before anything runs, the same from the `Runtime`
methods and the module-level functions."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import trio
from _helpers import echo_backend
from trio.testing import MockClock

import agentrt
from agentrt import (
    Agent,
    BackendNotFound,
    InvalidOptions,
    NoRuntime,
    Runtime,
    SQLiteStore,
    open_runtime,
)
from agentrt.testing import ScriptedBackend, fake_cli_executable

# Each test runs against the runtime's methods and against agentrt.* on the same runtime.
API = ["runtime", "module"]


def _api(kind: str, rt: Runtime) -> Any:
    return rt if kind == "runtime" else agentrt


@pytest.fixture(params=API)
def kind(request: pytest.FixtureRequest) -> str:
    value: str = request.param
    return value


@pytest.mark.parametrize("backend", [None, 5, object()])
async def test_a_backend_that_is_neither_a_name_nor_a_backend_is_refused(
    kind: str, backend: object
) -> None:
    async with open_runtime() as rt:
        with pytest.raises(InvalidOptions) as info:
            await _api(kind, rt).start_agent(Agent, name="a", backend=backend)
        assert info.value.key == "backend"
        assert "backend name" in str(info.value)
        with pytest.raises(BackendNotFound):
            await _api(kind, rt).start_agent(Agent, name="a", backend="")
        assert rt.agents() == ()


@pytest.mark.parametrize("agent", [42, "Agent", object])
async def test_an_agent_that_is_not_an_agent_is_a_type_error(kind: str, agent: object) -> None:
    backend = echo_backend()
    async with open_runtime() as rt:
        with pytest.raises(TypeError, match=r"^agent must be an agentrt\.Agent subclass"):
            await _api(kind, rt).start_agent(agent, name="a", backend=backend)
        assert rt.agents() == ()


@pytest.mark.parametrize("prompt", [None, b"hi", 5])
async def test_a_prompt_that_is_not_a_str_is_a_type_error(kind: str, prompt: object) -> None:
    backend = echo_backend()
    async with open_runtime() as rt:
        api = _api(kind, rt)
        await api.start_agent(Agent, name="a", backend=backend)
        with pytest.raises(TypeError, match=rf"^prompt must be a str, not {type(prompt).__name__}"):
            await api.ask("a", prompt)
        with pytest.raises(TypeError, match=r"^prompt must be a str"):
            await api.tell("a", prompt)
    assert backend.prompts == []


@pytest.mark.parametrize(("prompt", "word"), [("", "empty"), ("  \n\t", "blank")])
async def test_an_empty_or_blank_prompt_is_refused_before_a_turn(
    kind: str, prompt: str, word: str
) -> None:
    backend = echo_backend()
    async with open_runtime() as rt:
        api = _api(kind, rt)
        await api.start_agent(Agent, name="a", backend=backend)
        with pytest.raises(ValueError, match=rf"^prompt must not be {word}"):
            await api.ask("a", prompt)
        with pytest.raises(ValueError, match=rf"^prompt must not be {word}"):
            await api.tell("a", prompt)
        assert (await rt.status("a")).turns == 0
    assert backend.prompts == []


async def test_a_cwd_that_is_missing_or_a_file_is_refused_at_start(
    kind: str, tmp_path: Path
) -> None:
    a_file = tmp_path / "file"
    a_file.write_text("")
    async with open_runtime() as rt:
        api = _api(kind, rt)
        with pytest.raises(InvalidOptions, match="does not exist") as missing:
            await api.start_agent(Agent, name="a", backend="claude", cwd=str(tmp_path / "gone"))
        assert missing.value.key == "cwd"
        with pytest.raises(InvalidOptions, match="is not a directory") as not_dir:
            await api.start_agent(Agent, name="a", backend="claude", cwd=str(a_file))
        assert not_dir.value.key == "cwd"
        # The scripted backend's cwd goes through the same check.
        with pytest.raises(InvalidOptions, match="is not a directory"):
            await api.start_agent(Agent, name="a", backend=echo_backend(), cwd=str(a_file))
        assert rt.agents() == ()
        assert await rt.store.load("a") is None
        claude = fake_cli_executable(str(tmp_path), name="claude")  # installed, never run
        handle = await api.start_agent(
            Agent, name="a", backend="claude", cwd=str(tmp_path), binary=claude
        )
        assert handle.name == "a"


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("two\nlines", "U+000A, a control character"),
        ("nul\x00", "U+0000, a control character"),
        ("\x1b[31mred", "U+001B, a control character"),
        ("del\x7f", "U+007F, a control character"),
        ("sep\u2028", "U+2028, a line separator"),
        ("half\ud800", "U+D800, a lone surrogate"),
        ("x" * 256, "256 characters long; at most 255"),
        ("x" * 10_000, "10000 characters long"),
    ],
)
async def test_unprintable_or_long_names_are_refused(kind: str, name: str, why: str) -> None:
    async with open_runtime() as rt:
        with pytest.raises(InvalidOptions, match=re.escape(why)) as info:
            await _api(kind, rt).start_agent(Agent, name=name, backend=echo_backend())
        assert info.value.key == "name"
        assert len(str(info.value)) < 200
        assert rt.agents() == ()


async def test_names_with_spaces_slashes_dots_and_non_ascii_stay_valid(kind: str) -> None:
    names = ["a/b", "..", "code reviewer", "größe-é-日本", "x" * 255]
    async with open_runtime() as rt:
        api = _api(kind, rt)
        for name in names:
            await api.start_agent(Agent, name=name, backend=echo_backend())
        assert rt.agents() == tuple(names)
        assert (await api.ask("a/b", "hi")).text == "echo hi"


async def test_a_name_of_the_wrong_type_is_a_type_error(kind: str) -> None:
    async with open_runtime() as rt:
        api = _api(kind, rt)
        with pytest.raises(TypeError, match=r"^name must be a str, not int"):
            await api.start_agent(Agent, name=42, backend=echo_backend())
        with pytest.raises(TypeError, match=r"^name must be a str, not int"):
            await api.ask(42, "hi")
        with pytest.raises(TypeError, match=r"^name must be a str, not NoneType"):
            await api.status(None)


async def test_a_ref_of_the_wrong_type_is_a_type_error(kind: str) -> None:
    async with open_runtime() as rt:
        api = _api(kind, rt)
        await api.start_agent(Agent, name="a", backend=echo_backend())
        calls: list[Callable[[], Awaitable[object]]] = [
            lambda: api.poll("a:1"),
            lambda: api.withdraw(1),
            lambda: api.interrupt_request(None),
            lambda: api.wait(("a", 1)),
        ]
        for call in calls:
            with pytest.raises(TypeError, match=r"^ref must be an agentrt\.Ref"):
                await call()
        with pytest.raises(TypeError, match=r"^ref must be an agentrt\.Ref"):
            api.stream("a")


@pytest.mark.parametrize("as_path", [str, Path])
async def test_a_path_is_accepted_as_the_store(
    tmp_path: Path, as_path: Callable[[Path], Any]
) -> None:
    path = tmp_path / "given.sqlite3"
    async with open_runtime(store=as_path(path)) as rt:
        assert isinstance(rt.store, SQLiteStore)
        assert rt.store.path == path
        await rt.start_agent(Agent, name="a", backend=echo_backend())
    assert path.exists()


@pytest.mark.parametrize("store", [42, b"bytes", object()])
async def test_a_store_that_is_neither_is_a_type_error(store: object) -> None:
    with pytest.raises(TypeError, match=r"^store must be a SessionStore or the path"):
        async with open_runtime(store=store):  # type: ignore[arg-type]
            pass


async def test_calls_on_a_closed_runtime_say_it_is_closed() -> None:
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="a", backend=echo_backend())
        ref = await rt.tell("a", "hi")
    with pytest.raises(NoRuntime, match="this runtime is closed"):
        rt.stream(ref)
    waits: list[Callable[[], Awaitable[object]]] = [
        lambda: rt.tell("a", "x"),
        lambda: rt.poll(ref),
        lambda: rt.status("a"),
        lambda: rt.interrupt("a"),
        lambda: rt.ask("a", "x"),
        lambda: rt.wait(ref),
        lambda: rt.stop_agent("a"),
    ]
    for wait in waits:
        with pytest.raises(NoRuntime, match="this runtime is closed"):
            await wait()
    # Outside any runtime the module-level functions say there is none.
    with pytest.raises(NoRuntime, match="no agentrt runtime is open"):
        await agentrt.ask("a", "x")


async def test_a_backend_object_needs_the_backend_methods() -> None:
    half = type("Half", (), {"name": "half", "command": print})()
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="whole", backend=ScriptedBackend())
        with pytest.raises(InvalidOptions):
            await rt.start_agent(Agent, name="half", backend=half)
        assert rt.agents() == ("whole",)


async def test_checks_run_before_the_runtime_does_anything(autojump_clock: MockClock) -> None:
    # A refused start leaves no row and no task; the runtime goes on.
    async with open_runtime() as rt:
        with pytest.raises(InvalidOptions):
            await rt.start_agent(Agent, name="bad\n", backend=echo_backend())
        assert await rt.store.load("bad\n") is None
        await trio.lowlevel.checkpoint()
        assert rt.statistics().agents == 0


@pytest.mark.parametrize(
    ("prompt", "said"),
    [
        ("a\x00b", "contains U+0000 (NUL) at 1"),
        ("ok \ud83d!", "contains U+D83D, a lone surrogate, at 3"),
    ],
)
async def test_a_prompt_no_store_or_cli_can_take_is_refused_before_a_turn(
    kind: str, prompt: str, said: str, tmp_path: Path
) -> None:
    # On a SQLite store too: refused alike on every store (PostgreSQL refuses a NUL, no
    # UTF-8 holds a lone surrogate), before the request is kept.
    backend = echo_backend()
    async with open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        api = _api(kind, rt)
        await api.start_agent(Agent, name="a", backend=backend)
        for call in (api.ask, api.tell):
            with pytest.raises(ValueError, match=rf"^prompt {re.escape(said)}"):
                await call("a", prompt)
        assert (await rt.status("a")).turns == 0
    assert backend.prompts == []

import math
import re
from pathlib import Path

import attrs
import pytest
from _helpers import echo_backend

from agentrt import Agent, InvalidOptions, MemoryStore, RestartType, open_runtime
from agentrt._options import AgentOptions, split_options


def test_defaults_match_the_issue() -> None:
    options, rest = split_options({})
    assert options == AgentOptions(
        watchdog=600.0,
        after_result=30.0,
        first_event=None,
        retention="compact",
        max_events=1000,
        max_event_bytes=1024 * 1024,
        max_pending=1000,
        max_pending_bytes=1024 * 1024,
        max_results=100,
        max_result_bytes=8 * 1024 * 1024,
        restart=RestartType.PERMANENT,
    )
    assert rest == {}


def test_runtime_options_are_split_from_the_agents() -> None:
    options, rest = split_options(
        {"watchdog": None, "retention": "lossless", "restart": "temporary", "cwd": "/x", "k": 1}
    )
    assert options.watchdog is None
    assert options.retention == "lossless"
    assert options.restart is RestartType.TEMPORARY
    assert rest == {"cwd": "/x", "k": 1}


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("watchdog", 0),
        ("watchdog", -1),
        ("watchdog", math.inf),
        ("watchdog", math.nan),
        ("watchdog", "600"),
        ("watchdog", True),
        ("first_event", 0.0),
        ("after_result", 0),
        ("after_result", -30),
        ("after_result", math.inf),
        ("after_result", "30"),
        ("retention", "full"),
        ("max_events", -1),
        ("max_events", 1.5),
        ("max_event_bytes", None),
        ("max_pending", False),
        ("max_pending_bytes", "1MiB"),
        ("max_results", -5),
        ("max_result_bytes", 2.0),
        ("restart", "always"),
        ("restart", None),
    ],
)
async def test_each_bad_option_is_refused_naming_its_key(key: str, value: object) -> None:
    with pytest.raises(InvalidOptions) as info:
        split_options({key: value})
    assert info.value.key == key
    assert info.value.value is value or info.value.value == value
    assert repr(key) in str(info.value)
    # The same through start_agent: nothing is started.
    async with open_runtime() as rt:
        with pytest.raises(InvalidOptions) as info:
            await rt.start_agent(Agent, name="a", backend=echo_backend(), **{key: value})
        assert info.value.key == key
        assert rt.agents() == ()


@pytest.mark.parametrize("key", [field.name for field in attrs.fields(AgentOptions)])
def test_every_runtime_option_is_checked(key: str) -> None:
    # A field declared without a working check would take any value.
    value = object()
    with pytest.raises(InvalidOptions) as info:
        split_options({key: value})
    assert (info.value.key, info.value.value) == (key, value)


def test_after_result_is_seconds_or_none() -> None:
    assert split_options({"after_result": 5})[0].after_result == 5.0
    assert split_options({"after_result": None})[0].after_result is None
    with pytest.raises(InvalidOptions) as info:
        split_options({"after_result": 0})
    assert str(info.value) == (
        "option 'after_result'=0: must be a positive number of seconds, or None (no bound)"
    )


async def test_unknown_keys_go_to_init_agent_and_the_backend_names_them() -> None:
    async with open_runtime() as rt:
        with pytest.raises(InvalidOptions) as info:
            await rt.start_agent(Agent, name="a", backend=echo_backend(), cwd=".", colour=3)
        assert info.value.key == "colour"
        assert info.value.value == 3
        assert "the 'scripted' backend's: cwd)" in str(info.value)
        assert rt.agents() == ()


RUNTIME_OPTIONS = [field.name for field in attrs.fields(AgentOptions)]


@pytest.mark.parametrize(
    ("backend", "given", "closest", "backend_options"),
    [
        ("claude", "watchdgo", "watchdog", ["binary", "cwd", "model", "allowed_tools"]),
        ("claude", "modle", "model", ["binary", "cwd", "model", "allowed_tools"]),
        ("codex", "kep_alive", "keep_alive", ["binary", "cwd", "model", "sandbox"]),
        (echo_backend(), "kill_grase", "kill_grace", ["cwd"]),
    ],
)
async def test_a_misspelt_option_names_the_closest_and_every_option_the_agent_takes(
    backend: object, given: str, closest: str, backend_options: list[str]
) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as info:
            await rt.start_agent(Agent, name="a", backend=backend, cwd=".", **{given: 5})
        assert rt.agents() == ()
    error = info.value
    assert (error.key, error.value) == (given, 5)
    message = str(error)
    assert f"unknown option; did you mean {closest!r}?" in message
    listed = re.findall(r"[a-z_]+", message.partition("? (")[2])
    assert set(RUNTIME_OPTIONS) <= set(listed)
    assert set(backend_options) <= set(listed)
    assert error.known_options is not None
    assert set(RUNTIME_OPTIONS) | set(backend_options) <= set(error.known_options)


async def test_an_option_nothing_is_close_to_is_refused_with_the_list() -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as info:
            await rt.start_agent(Agent, name="a", backend="claude", cwd=".", zzz=1)
    assert "did you mean" not in str(info.value)
    assert "watchdog" in str(info.value) and "allowed_tools" in str(info.value)


async def test_a_runtime_option_init_agent_returns_is_refused_as_such() -> None:
    class Misplaced(Agent):
        def init_agent(self, **options: object) -> dict[str, object]:
            return {**options, "watchdog": 5}

    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as info:
            await rt.start_agent(Misplaced, name="a", backend="claude", cwd=".")
    assert info.value.key == "watchdog"
    assert "a runtime option, for start_agent, not for what init_agent returns" in str(info.value)
    assert "did you mean" not in str(info.value)


async def test_init_agent_receives_the_rest_and_returns_the_backend_options(
    tmp_path: Path,
) -> None:
    seen: dict[str, object] = {}
    (tmp_path / "p").mkdir()

    class Picky(Agent):
        def init_agent(self, **options: object) -> dict[str, object]:
            seen.update(options)
            return {"cwd": str(tmp_path / str(options.pop("project")))}

    backend = echo_backend()
    async with open_runtime() as rt:
        await rt.start_agent(Picky, name="a", backend=backend, project="p", watchdog=5)
        await rt.ask("a", "hi")
    assert seen == {"project": "p"}
    assert backend.calls[0].options.cwd == str(tmp_path / "p")


async def test_async_init_agent_is_awaited(tmp_path: Path) -> None:
    class Slow(Agent):
        async def init_agent(self, **options: object) -> dict[str, object]:
            return {"cwd": str(tmp_path)}

    backend = echo_backend()
    async with open_runtime() as rt:
        await rt.start_agent(Slow, name="a", backend=backend)
        await rt.ask("a", "hi")
    assert backend.calls[0].options.cwd == str(tmp_path)


@pytest.mark.parametrize("value", [0, -1, 1.5, True, "4"])
async def test_max_processes_is_validated(value: object) -> None:
    with pytest.raises(InvalidOptions) as info:
        async with open_runtime(max_processes=value):  # type: ignore[arg-type]
            pass
    assert info.value.key == "max_processes"


async def test_bad_names_are_refused() -> None:
    async with open_runtime() as rt:
        with pytest.raises(InvalidOptions) as info:
            await rt.start_agent(Agent, name="", backend=echo_backend())
        assert info.value.key == "name"

import math
from pathlib import Path

import attrs
import pytest
from _helpers import echo_backend

from agentrt import Agent, CliNotFound, InvalidOptions, MemoryStore, RestartType, open_runtime
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
        assert "of the 'scripted' backend" in str(info.value)
        assert info.value.known_options is not None and "cwd" in info.value.known_options
        assert rt.agents() == ()


RUNTIME_OPTIONS = [field.name for field in attrs.fields(AgentOptions)]


@pytest.mark.parametrize(
    ("backend", "given", "close", "backend_options"),
    [
        ("claude", "watchdgo", "'watchdog'", ["binary", "cwd", "model", "allowed_tools"]),
        ("claude", "modle", "'model' or 'idle'", ["binary", "cwd", "model", "allowed_tools"]),
        ("codex", "kep_alive", "'keep_alive'", ["binary", "cwd", "model", "sandbox"]),
        (echo_backend(), "kill_grase", "'kill_grace'", ["cwd"]),
    ],
)
async def test_a_misspelt_option_names_the_close_ones_and_the_page_of_every_option(
    backend: object, given: str, close: str, backend_options: list[str]
) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as info:
            await rt.start_agent(Agent, name="a", backend=backend, cwd=".", **{given: 5})
        assert rt.agents() == ()
    error = info.value
    assert (error.key, error.value) == (given, 5)
    message = str(error)
    assert f"unknown option; did you mean {close}? (every option of the runtime" in message
    # Not the 65 names on one line: the page that explains them.
    assert message.endswith("backend: docs/reference/options.md)") and len(message) < 200
    assert (Path(__file__).parent.parent / "docs/reference/options.md").is_file()
    assert error.known_options is not None
    assert set(RUNTIME_OPTIONS) | set(backend_options) <= set(error.known_options)


async def test_an_option_nothing_is_close_to_is_refused_with_the_page() -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions) as info:
            await rt.start_agent(Agent, name="a", backend="claude", cwd=".", zzz=1)
    assert str(info.value) == (
        "option 'zzz'=1: unknown option (every option of the runtime and of the 'claude' "
        "backend: docs/reference/options.md)"
    )


@pytest.mark.parametrize(
    ("given", "close"), [("max_restart", "max_restarts"), ("lease_tl", "lease_ttl")]
)
async def test_open_runtime_refuses_a_misspelt_keyword_naming_the_closest(
    given: str, close: str
) -> None:
    with pytest.raises(InvalidOptions) as info:
        async with open_runtime(store=MemoryStore(), **{given: 3}):  # type: ignore[arg-type]
            pass
    error = info.value
    assert (error.key, error.value) == (given, 3)
    assert str(error) == (
        f"option {given!r}=3: not an option of open_runtime; did you mean {close!r}?"
    )
    assert error.known_options is not None and close in error.known_options


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


# --- the CLI an agent would run: found at start_agent, never spawned there -------------


@pytest.mark.parametrize(
    ("backend", "warm"),
    [
        ("claude", False),
        ("claude", True),
        ("codex", False),
        ("codex", True),
        ("gemini", False),
        ("qwen", False),
    ],
)
async def test_a_missing_cli_is_refused_at_start_with_its_fix(
    backend: str, warm: bool, tmp_path: Path
) -> None:
    missing = str(tmp_path / "no" / backend)
    options = {"keep_alive": 30} if warm else {}
    store = MemoryStore()
    async with open_runtime(store=store) as rt:
        with pytest.raises(CliNotFound) as info:
            await rt.start_agent(Agent, name="a", backend=backend, binary=missing, **options)
        assert rt.agents() == ()
    error = info.value
    assert isinstance(error, InvalidOptions)
    assert (error.key, error.value, error.backend, error.binary) == (
        "binary",
        missing,
        backend,
        missing,
    )
    first, fix = str(error).split("\n")
    assert first == f"option 'binary'={missing!r}: the {backend} CLI is no executable file"
    assert fix.startswith("Fix: point binary= at the CLI's executable file, or install ")
    assert f"{backend.upper()}_CLI" in fix
    async with store.handle() as reader:
        assert await reader.list() == () and await reader.leases() == ()


async def test_a_cli_is_looked_for_on_the_path_of_its_own_environment(tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    binary = tmp_path / "bin" / "claude"
    binary.parent.mkdir()
    binary.write_text(f"#!/bin/sh\ntouch '{ran}'\n")
    binary.chmod(0o755)
    (tmp_path / "not-executable").write_text("")
    (tmp_path / "a-directory").mkdir()
    path = {"env": {"PATH": str(binary.parent)}}
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="on-path", backend="claude", **path)
        # Relative to the agent's cwd, as its turns run it.
        await rt.start_agent(
            Agent, name="relative", backend="claude", binary="bin/claude", cwd=str(tmp_path)
        )
        for name in ("not-executable", "a-directory"):
            with pytest.raises(CliNotFound):
                await rt.start_agent(
                    Agent, name=name, backend="claude", binary=str(tmp_path / name)
                )
        with pytest.raises(CliNotFound) as info:
            await rt.start_agent(Agent, name="elsewhere", backend="claude", env={"PATH": "/"})
        assert str(info.value).startswith(
            "option 'binary'='claude': the claude CLI is not found on the agent's PATH\nFix: "
        )
    assert not ran.exists()  # found, not run: start_agent stays a lookup

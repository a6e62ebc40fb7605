"""The documentation site builds with every warning an error and its reference has every
public name; every code block of the site, the README and the changelog is run by a test
(the blocks of the pages without a test file of their own run here)."""

from __future__ import annotations

import ast
import importlib.util
import inspect
import logging
import os
import re
import subprocess
import sys
import tomllib
import types
from collections.abc import Callable
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
import trio
from doc_blocks import DOCS, ROOT, all_blocks, doc_block
from sphinx.util.inventory import InventoryFile
from test_backend_conformance import NEEDS_A_PROCESS, ScriptedHarness
from test_store_conformance import ToyStore
from test_workspaces import git

import agentrt
import agentrt.asyncio
import agentrt.backend
import agentrt.hooks
import agentrt.lowlevel
import agentrt.store
import agentrt.sync
import agentrt.testing
from agentrt.testing import AnthropicText, FakeAnthropic, backend_conformance

TESTS = Path(__file__).parent

# Each program block, by a line only it has (a block shown on two pages reads the same on
# both): the test that runs it, which names the marker in a `doc_block("...")` call.
RUN_BY: dict[str, tuple[str, str]] = {
    "trio.run(main)": ("test_readme.py", "test_the_quickstart_runs_as_printed"),
    "agentrt.testing.fake_anthropic": (
        "test_readme.py",
        "test_the_no_login_recipe_runs_as_printed",
    ),
    "test_a_hung_turn_is_ended_by_the_watchdog": (
        "test_readme.py",
        "test_the_testing_example_passes",
    ),
    "trio_mode = true": ("test_readme.py", "test_the_testing_example_passes"),
    "OTLPSpanExporter": (
        "test_telemetry.py",
        "test_the_readmes_otlp_setup_exports_a_turns_span_and_metrics",
    ),
    "JsonFormatter": (
        "test_telemetry.py",
        "test_the_readmes_json_log_setup_indexes_the_agents_fields",
    ),
    "async def chat_warm": ("test_docs.py", "test_the_warm_session_block_keeps_one_cli"),
    "async def schedule_coder": ("test_schedules.py", "test_the_guides_schedule_block_runs"),
    "async def follow_coder": ("test_unsolicited.py", "test_the_guides_reader_block_runs"),
    "store_conformance(harness": ("test_docs.py", "test_the_store_kit_block_passes_on_a_toy_store"),
    "SQLiteStore(path)": ("test_docs.py", "test_the_deployment_blocks_run"),
    'rt.request("coder", "job-42")': ("test_docs.py", "test_the_deployment_blocks_run"),
    'node="worker-3", lease_ttl=10': ("test_docs.py", "test_the_deployment_blocks_run"),
    "portable=True": ("test_docs.py", "test_the_deployment_blocks_run"),
    'node="web-1"': ("test_docs.py", "test_the_deployment_blocks_run"),
    "async with rt.stream(ref) as events": (
        "test_routed_streams.py",
        "test_the_deployment_pages_stream_block_follows_another_runtimes_turn",
    ),
    "host_agents=True": ("test_docs.py", "test_the_deployment_blocks_run"),
    'credential="team-max"': ("test_fleet.py", "test_the_guides_fleet_starts_on_one_credential"),
    'backend="qwen"': ("test_docs.py", "test_the_qwen_pages_block_starts_a_qwen_agent"),
    'backend="gemini"': ("test_docs.py", "test_the_gemini_pages_block_starts_a_gemini_agent"),
    'backend="acp"': ("test_docs.py", "test_the_acp_pages_block_starts_an_acp_agent"),
    'backend="opencode"': ("test_docs.py", "test_the_opencode_and_pi_pages_blocks_start_agents"),
    'backend="pi"': ("test_docs.py", "test_the_opencode_and_pi_pages_blocks_start_agents"),
    "asyncio.run(main())": ("test_readme.py", "test_the_asyncio_quickstart_runs_as_printed"),
    "agentrt.sync.open_runtime(store": ("test_readme.py", "test_the_sync_example_runs_as_printed"),
    "class Watcher": ("test_docs.py", "test_the_hooks_pages_watcher_blocks_and_logs"),
    "class Careful": ("test_docs.py", "test_the_consoles_careful_agent_asks_a_person"),
    "agentrt.open_console(rt": ("test_docs.py", "test_the_consoles_own_program_block_serves_it"),
    "turn_history=2": ("test_docs.py", "test_the_consoles_turn_history_block_keeps_the_newest"),
    '[project.entry-points."agentrt.backends"]': (
        "test_docs.py",
        "test_the_backend_pages_entry_point_is_pyprojects_form",
    ),
    "workspace=agentrt.GitWorktree(repo)": (
        "test_docs.py",
        "test_the_workspace_pages_blocks_make_worktrees_budgets_and_a_fork",
    ),
    "budget_usd=5.0": (
        "test_docs.py",
        "test_the_workspace_pages_blocks_make_worktrees_budgets_and_a_fork",
    ),
    'fork_from="coder"': (
        "test_docs.py",
        "test_the_workspace_pages_blocks_make_worktrees_budgets_and_a_fork",
    ),
    "def test_mycli_passes": (
        "test_docs.py",
        "test_the_backend_kit_block_runs_on_a_scripted_backend",
    ),
}

# Blocks that are not programs, by their language: commands shown (they install things or
# need a login; the tests run their like through the same entry points) and output.
NOT_PROGRAMS = {"console", "text"}
# MyST directives written as fences: they include files (the examples, run by
# tests/test_examples.py; the changelog) or build the site, and hold no code of their own.
DIRECTIVES = {"{literalinclude}", "{include}", "{toctree}", "{eval-rst}", "{py:currentmodule}"}


def test_every_code_block_is_run_by_a_test() -> None:
    for block in all_blocks():
        where = block.where()
        assert block.fenced, f"{where}: an indented block: fence it, with its language"
        if block.language in DIRECTIVES or block.language in NOT_PROGRAMS:
            continue
        assert block.language in ("python", "sh", "toml"), f"{where}: a ```{block.info} block"
        markers = [marker for marker in RUN_BY if marker in block.text]
        assert len(markers) == 1, f"{where}: say in RUN_BY which test runs this block"
        [marker] = markers
        test_file, test_name = RUN_BY[marker]
        source = (TESTS / test_file).read_text()
        assert f"def {test_name}(" in source, (marker, test_file, test_name)
        start = source.index(f"def {test_name}(")
        body = source[start:].split("\n\n\n")[0]
        calls = (f'_block("{marker}"', f"_block({marker!r}")
        assert any(call in body for call in calls), f"{test_name} does not run {marker!r}"


def load_conf() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("docs_conf", DOCS / "conf.py")
    assert spec is not None and spec.loader is not None
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    return conf


def test_a_pending_page_leaves_the_list_once_written() -> None:
    conf = load_conf()
    written = sorted(set(conf.PENDING_PAGES) - set(conf.missing_pages()))
    assert written == [], f"docs/{written[0]}.md exists: drop it from PENDING_PAGES in docs/conf.py"


PUBLIC_MODULES = [
    agentrt,
    agentrt.asyncio,
    agentrt.sync,
    agentrt.backend,
    agentrt.hooks,
    agentrt.store,
    agentrt.lowlevel,
    agentrt.testing,
]


def public_names(module: types.ModuleType) -> list[str]:
    """A module's public names, without those it passes on from `agentrt` or
    `agentrt.hooks` (documented there)."""
    names = getattr(module, "__all__", None) or [
        n for n in vars(module) if not n.startswith("_") and n != "annotations"
    ]
    return [
        n
        for n in names
        if not isinstance(getattr(module, n), types.ModuleType)
        and (
            module in HOMES
            or all(getattr(home, n, None) is not getattr(module, n) for home in HOMES)
        )
    ]


# The modules whose names other public modules pass on (agentrt.backend gives a backend the
# events of agentrt and the hook events of agentrt.hooks).
HOMES = (agentrt, agentrt.hooks)


def test_the_site_builds_with_warnings_as_errors_and_documents_every_public_name(
    tmp_path: Path,
) -> None:
    out = tmp_path / "html"
    build = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html"]
    done = subprocess.run(
        [*build, str(DOCS), str(out)], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    with (out / "objects.inv").open("rb") as inventory:
        data = InventoryFile.load(inventory, "", lambda base, uri: uri)
    names = {name for entries in data.values() for name in entries}
    missing = [
        f"{module.__name__}.{name}"
        for module in PUBLIC_MODULES
        for name in public_names(module)
        if f"{module.__name__}.{name}" not in names
    ]
    assert missing == [], f"not in the reference (no docstring, or no entry): {missing}"


def calls() -> dict[str, Callable[..., object]]:
    """The calls of the application's API: `agentrt`'s functions (each `Runtime` method's
    module-level twin shares its docstring) and the public methods of `Runtime`,
    `Supervisor` and `EventStream`."""
    found: dict[str, Callable[..., object]] = {
        name: obj
        for name, obj in vars(agentrt).items()
        if name in agentrt.__all__ and inspect.isfunction(obj)
    }
    for owner in (agentrt.Runtime, agentrt.Supervisor, agentrt.EventStream):
        for name, member in vars(owner).items():
            if inspect.isfunction(member) and (not name.startswith("_") or name == "__anext__"):
                found[f"{owner.__name__}.{name}"] = member
    return found


def waits(call: Callable[..., object]) -> bool:
    """Whether ``call`` is awaited (or entered with ``async with``): it can be cancelled."""
    inner = inspect.unwrap(call)
    return inspect.iscoroutinefunction(inner) or inspect.isasyncgenfunction(inner)


def test_every_call_says_what_it_raises_and_what_cancelling_it_does() -> None:
    undocumented = []
    for name, call in calls().items():
        doc = inspect.getdoc(call) or ""
        if not re.search(r"\b[Rr]ais(es|ed|e)\b", doc):
            undocumented.append(f"{name}: what it raises")
        if waits(call) and "Cancellation:" not in doc:
            undocumented.append(f"{name}: a Cancellation: paragraph")
    assert undocumented == []


async def run_block(marker: str, namespace: dict[str, Any]) -> None:
    """Run a block in ``namespace`` as the page's reader would type it in an async REPL
    (top-level ``await`` and ``async with``)."""
    code = compile(doc_block(marker), marker, "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    result = eval(code, namespace)
    if result is not None:
        await result


@pytest.mark.realcli
async def test_the_warm_session_block_keeps_one_cli(
    fake_claude: FakeAnthropic, tmp_path: Path
) -> None:
    fake_claude.set_script([AnthropicText("a.py and b.py"), AnthropicText("b.py")])
    namespace: dict[str, Any] = {"agentrt": agentrt}
    await run_block("async def chat_warm", namespace)
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        texts = await namespace["chat_warm"](rt, str(tmp_path))
        cli = (await rt.status("pair")).cli_pid
    assert texts == ["a.py and b.py", "b.py"] and cli is not None
    # Both turns went to one CLI: one process, two model calls on one session.
    first, second = fake_claude.message_requests
    session = "x-claude-code-session-id"
    assert first.headers[session] == second.headers[session]


async def test_the_store_kit_block_passes_on_a_toy_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    my_store = types.ModuleType("my_store")
    my_store.MyStore = lambda path: ToyStore()  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "my_store", my_store)
    namespace: dict[str, Any] = {}
    exec(compile(doc_block("store_conformance(harness"), "stores.md", "exec"), namespace)
    [parametrize] = namespace["test_my_store"].pytestmark
    ran = skipped = 0
    for name in parametrize.args[1]:
        try:
            await namespace["test_my_store"](name, tmp_path)
            ran += 1
        except pytest.skip.Exception:
            skipped += 1
    # The toy store has the core only: its checks run, the capabilities' are skipped.
    assert ran > 0 and skipped > 0


@pytest.fixture
def installed_clis(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every shipped backend's CLI installed, as for the reader (start_agent looks for it;
    these blocks run no turn)."""
    for name in ("claude", "codex", "gemini", "opencode", "pi", "qwen"):
        binary = agentrt.testing.fake_cli_executable(str(tmp_path), name=name)
        monkeypatch.setenv(f"{name.upper()}_CLI", binary)


@pytest.mark.usefixtures("installed_clis")
async def test_the_qwen_pages_block_starts_a_qwen_agent(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        await run_block('backend="qwen"', {"rt": rt, "Agent": agentrt.Agent})
        status = await rt.status("coder")
    assert (status.name, status.mode, status.turns) == ("coder", "one_shot", 0)


async def test_the_acp_pages_block_starts_an_acp_agent(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Its agent, qwen, on PATH (the block runs no turn).
    agentrt.testing.fake_cli_executable(str(tmp_path), name="qwen")
    monkeypatch.setenv("PATH", f"{tmp_path}:{os.environ['PATH']}")
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        await run_block('backend="acp"', {"rt": rt, "agentrt": agentrt})
        status = await rt.status("coder")
    # Every ACP turn runs on a live process (one per turn without keep_alive).
    assert (status.name, status.mode, status.turns) == ("coder", "live", 0)


@pytest.mark.usefixtures("installed_clis")
async def test_the_gemini_pages_block_starts_a_gemini_agent(tmp_path: Path) -> None:
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        namespace = {"rt": rt, "agentrt": agentrt, "home": str(tmp_path), "key": "k"}
        await run_block('backend="gemini"', namespace)
        status = await rt.status("coder")
        handle = rt.whereis("coder")
    assert (status.name, status.mode, status.turns) == ("coder", "one_shot", 0)
    assert handle is not None and handle.backend == "gemini"


@pytest.mark.usefixtures("installed_clis")
async def test_the_opencode_and_pi_pages_blocks_start_agents(tmp_path: Path) -> None:
    backends = []
    namespace: dict[str, Any] = {"agentrt": agentrt, "home": str(tmp_path), "key": "k"}
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        await run_block('backend="opencode"', {**namespace, "rt": rt})
        backends.append((await rt.status("coder"), rt.whereis("coder")))
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        await run_block('backend="pi"', {**namespace, "rt": rt})
        backends.append((await rt.status("coder"), rt.whereis("coder")))
    for (status, handle), backend in zip(backends, ("opencode", "pi"), strict=True):
        assert (status.name, status.mode, status.turns) == ("coder", "one_shot", 0)
        assert handle is not None and handle.backend == backend


@pytest.mark.usefixtures("installed_clis")
async def test_the_hooks_pages_watcher_blocks_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    namespace: dict[str, Any] = {"agentrt": agentrt, "log": logging.getLogger("watcher")}
    exec(compile(doc_block("class Watcher"), "hooks.md", "exec"), namespace)
    watcher = namespace["Watcher"]()
    blocked = watcher.handle_hook(agentrt.hooks.PreToolUseHook(tool_name="WebFetch"))
    assert blocked == agentrt.Block("no network from this agent")
    failed = agentrt.hooks.PostToolUseFailureHook(tool_name="Bash", error="exit 1")
    assert watcher.handle_hook(failed) is None
    assert caplog.messages[-1] == "Bash failed: exit 1"
    # Its hook kinds are ones the CLI has: the agent starts, on the live channel.
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        await rt.start_agent(namespace["Watcher"], name="watcher", backend="claude")
        assert (await rt.status("watcher")).mode == "live"


def test_the_consoles_careful_agent_asks_a_person() -> None:
    namespace: dict[str, Any] = {"agentrt": agentrt}
    exec(compile(doc_block("class Careful"), "console.md", "exec"), namespace)
    careful = namespace["Careful"]()
    read = agentrt.ToolRequest("Read", {"file_path": "a.py"}, "t1")
    assert careful.approve_tool(read) == agentrt.Allow()
    asked = careful.approve_tool(agentrt.ToolRequest("Bash", {"command": "make"}, "t2"))
    assert asked == agentrt.AskOperator(reason="Bash may change the repository")


@pytest.mark.usefixtures("installed_clis")
async def test_the_consoles_own_program_block_serves_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    namespace = {"agentrt": agentrt, "store": agentrt.MemoryStore(), "repo": str(tmp_path)}
    await run_block("agentrt.open_console(rt", namespace)
    [url] = capsys.readouterr().out.splitlines()
    assert url.startswith("http://127.0.0.1:") and "token" in url


async def test_the_consoles_turn_history_block_keeps_the_newest() -> None:
    namespace: dict[str, Any] = {"agentrt": agentrt}
    await run_block("turn_history=2", namespace)
    assert [t.outcome for t in namespace["turns"]] == ["complete", "complete"]


def test_the_backend_pages_entry_point_is_pyprojects_form() -> None:
    shown = tomllib.loads(doc_block('[project.entry-points."agentrt.backends"]', "toml"))
    ours = tomllib.loads((ROOT / "pyproject.toml").read_text())
    [entry] = shown["project"]["entry-points"]["agentrt.backends"].values()
    form = re.compile(r"[\w.]+:\w+")
    assert form.fullmatch(entry)
    assert all(
        form.fullmatch(v) for v in ours["project"]["entry-points"]["agentrt.backends"].values()
    )


def test_the_backend_kit_block_runs_on_a_scripted_backend() -> None:
    namespace: dict[str, Any] = {
        "backend_conformance": backend_conformance,
        "MyHarness": ScriptedHarness,
        "pytest": pytest,
        "trio": trio,
    }
    exec(compile(doc_block("def test_mycli_passes"), "backends.md", "exec"), namespace)
    skipped = set()
    for name in namespace["CHECKS"]:
        try:
            namespace["test_mycli_passes"](name)
        except pytest.skip.Exception:
            skipped.add(name)
    # What the scripted backend cannot be asked is skipped; every other check passed.
    assert skipped == NEEDS_A_PROCESS


class Coder(agentrt.Agent):
    """The deployment guide's agent (importable, so a host can take it over)."""


@pytest.mark.realcli
async def test_the_deployment_blocks_run(
    fake_claude: FakeAnthropic,
    postgres_dsn: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    namespace: dict[str, Any] = {
        "agentrt": agentrt,
        "trio": trio,
        "Coder": Coder,
        "repo": str(repo),
        "path": str(tmp_path / "sessions.sqlite3"),
        "dsn": postgres_dsn,
    }
    fake_claude.set_script([AnthropicText("Fixed."), AnthropicText("Updated.")])
    await run_block("SQLiteStore(path)", namespace)
    await run_block('rt.request("coder", "job-42")', namespace)  # re-attaching by key
    await run_block('node="worker-3", lease_ttl=10', namespace)
    await run_block("portable=True", namespace)
    # The routed calls reach "coder" on the runtime that owns it.
    async with agentrt.open_runtime(
        store=agentrt.PostgresStore(postgres_dsn), node="worker-3"
    ) as owner:
        await owner.start_agent(Coder, name="coder", backend="claude", cwd=str(repo))
        await run_block('node="web-1"', namespace)
        assert namespace["answer"].text == "Fixed."
        assert isinstance(namespace["settled"], agentrt.Completed)
    assert capsys.readouterr().out == "idle\n"
    # The owner closed, keeping the agent's spec: the host takes it over.
    del namespace["rt"]

    async def host() -> None:
        await run_block("host_agents=True", namespace)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(host)
        with trio.fail_after(30):
            while not ("rt" in namespace and "coder" in namespace["rt"].agents()):  # noqa: ASYNC110 (the block's runtime has no event to wait on)
                await trio.sleep(0.05)
        nursery.cancel_scope.cancel()


@pytest.mark.realcli
@pytest.mark.usefixtures("default_store")
async def test_the_workspace_pages_blocks_make_worktrees_budgets_and_a_fork(
    fake_claude: FakeAnthropic, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "notes.txt").write_text("first line\n")
    git(repo, "add", "notes.txt")
    git(repo, "commit", "-q", "-m", "first")
    worktrees = Path(f"{repo}.worktrees")
    # Every block's runtime keeps its records in one file: each start of "coder" after the
    # first finds its worktree there.
    path = tmp_path / "sessions.sqlite3"
    monkeypatch.setenv("AGENTRT_STORE", str(path))
    # The first block: a worktree of the agent's own, on its own branch.
    async with agentrt.open_runtime(store=agentrt.SQLiteStore(path)) as rt:
        namespace = {"rt": rt, "agentrt": agentrt, "repo": str(repo)}
        await run_block("workspace=agentrt.GitWorktree(repo)", namespace)
        assert (await rt.status("coder")).budget_left_usd is None
        [stored] = await rt.workspaces()
    assert (stored.stored.name, stored.stored.branch) == ("coder", "agentrt/coder")
    assert git(worktrees / "agentrt/coder", "branch", "--show-current") == "agentrt/coder"
    # The budgets block, on the default store, in the repository.
    monkeypatch.chdir(repo)
    await run_block("budget_usd=5.0", {"agentrt": agentrt})
    # The fork block: the fork starts on a copy of coder's conversation, on its own branch.
    fake_claude.set_script([AnthropicText("Original."), AnthropicText("Forked.")])
    async with agentrt.open_runtime(store=agentrt.SQLiteStore(path)) as rt:
        workspace = agentrt.GitWorktree(str(repo))
        await rt.start_agent(agentrt.Agent, name="coder", backend="claude", workspace=workspace)
        budget = (await rt.status("coder")).budget_left_usd
        assert (await rt.ask("coder", "Look.")).text == "Original."
        await run_block('fork_from="coder"', {"rt": rt, "agentrt": agentrt})
        assert (await rt.ask("coder-alt", "Try another way.")).text == "Forked."
        original = await rt.status("coder")
        fork = await rt.status("coder-alt")
        paths = {w.stored.name: w.stored.path for w in await rt.workspaces()}
    assert budget is None  # the budgets were the block's runtime's and supervisor's
    assert paths["coder"] == stored.stored.path  # every start used the one worktree
    assert fork.session_id is not None and fork.session_id != original.session_id
    assert git(worktrees / "agentrt/coder-alt", "branch", "--show-current") == "agentrt/coder-alt"


def test_the_command_reference_names_every_subcommand() -> None:
    reference = (DOCS / "reference" / "command.md").read_text()
    # The subcommands as `agentrt --help` lists them: each at the head of a line of its own.
    shown = subprocess.run(
        [sys.executable, "-m", "agentrt", "--help"], capture_output=True, text=True, check=True
    ).stdout
    listed = shown.split("\n  COMMAND\n", 1)[1].split("\n\n", 1)[0]
    commands = re.findall(r"^ {4}(\S+)", listed, re.MULTILINE)
    assert {"demo", "doctor", "ask", "console"} <= set(commands)
    missing = [name for name in commands if f"- `agentrt {name}" not in reference]
    assert missing == []


def named_clis(text: str) -> list[str]:
    """The CLIs an introduction names: "coding-CLI agents (A, B, ...)"."""
    found = re.search(r"coding-CLI agents \(([^)]*)\)", " ".join(text.split()))
    assert found is not None
    return found.group(1).split(", ")


def test_the_readme_and_the_sites_index_name_every_cli() -> None:
    readme = named_clis((ROOT / "README.md").read_text())
    installed = entry_points(group="agentrt.backends").names
    assert len(readme) == len(installed)
    assert named_clis((DOCS / "index.md").read_text()) == readme


def test_the_readme_has_no_image_a_package_index_page_cannot_show() -> None:
    # The README is the package's long description: shown on an index page, without the
    # repository's files beside it, a relative image is a broken one.
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", (ROOT / "README.md").read_text())
    assert [image for image in images if "://" not in image] == []

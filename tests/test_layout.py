"""The package layout: the layer map in agentrt/__init__.py (and its copy in
docs/architecture.md) held against the files and the static import graph, and the rules an
import can break at run time: the repository's backends/ folder is installed as
agentrt.backends and nowhere else, and the core never imports the command. Every module,
file and name docs/architecture.md cites is held against the code too, so the page cannot
name what is gone.

The graph is read with `ast`, so it has every import: TYPE_CHECKING blocks and imports
inside functions included. The map is read from agentrt/__init__.py, the one a reader of
the code meets first, so that the comment cannot drift from the code; the docs' table must
say the same."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "agentrt"
BACKENDS = ROOT / "backends"  # installed as agentrt.backends
# The backends stand beside the layers: above the floor (they import agentrt.backend and
# nothing else of agentrt) and below every layer that might name one.
ADAPTERS = 0.5

_LAYER = re.compile(r"^# L(\d+) [^:]+:")
_NAMES = re.compile(r"^#     (\S.*)$")
_DOCS_ROW = re.compile(r"^\| L(\d+) [^|]*\|[^|]*\|(.*)\|\s*$")


def _run(code: str, cwd: Path) -> list[str]:
    # A fresh interpreter, away from the repository: what an installed agentrt imports.
    return subprocess.run(
        [sys.executable, "-I", "-c", code], cwd=cwd, capture_output=True, text=True, check=True
    ).stdout.split()


################################################################
# The map, the files and the graph
################################################################


def layer_map(text: str | None = None) -> dict[str, int]:
    """The map in agentrt/__init__.py's opening comment: module (relative to agentrt,
    ``__init__`` for the package itself) -> layer number."""
    if text is None:
        text = (PACKAGE / "__init__.py").read_text()
    layers: dict[str, int] = {}
    layer: int | None = None
    for line in text.splitlines():
        if match := _LAYER.match(line):
            layer = int(match.group(1))
        elif layer is not None and (match := _NAMES.match(line)):
            for name in match.group(1).split():
                assert name not in layers, f"{name} is in the map twice"
                layers[name] = layer
        else:
            layer = None
    return layers


def docs_map(text: str | None = None) -> dict[str, int]:
    """The same map, from the table under docs/architecture.md's "Layers"."""
    if text is None:
        text = (ROOT / "docs" / "architecture.md").read_text()
    layers: dict[str, int] = {}
    section = text.split("\n## Layers\n", 1)[1].split("\n## ", 1)[0]
    for line in section.splitlines():
        if match := _DOCS_ROW.match(line):
            for name in re.findall(r"`([\w.]+)`", match.group(2)):
                assert name not in layers, f"{name} is in the docs' table twice"
                layers[name] = int(match.group(1))
    return layers


def _is_empty(path: Path) -> bool:
    # A package's __init__.py with nothing but a docstring needs no place in the map.
    body = ast.parse(path.read_text()).body
    return all(isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant) for n in body)


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of agentrt and of the backends, by its dotted name once installed."""
    found: dict[str, Path] = {}
    for top, name in ((root / "agentrt", "agentrt"), (root / "backends", "agentrt.backends")):
        for path in sorted(top.rglob("*.py")):
            parts = path.relative_to(top).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((name, *parts))] = path
    return found


def mapped_name(module: str) -> str:
    """A module's name in the map: relative to agentrt; the package itself is __init__."""
    return "__init__" if module == "agentrt" else module.removeprefix("agentrt.")


def _targets(module: str, is_package: bool, node: ast.Import | ast.ImportFrom) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
        return
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - node.level + 1]
        source = ".".join([*base, *([node.module] if node.module else [])])
    else:
        source = node.module or ""
    for alias in node.names:
        yield f"{source}.{alias.name}"  # a submodule, or a name of `source` (trimmed below)


def import_graph(found: Mapping[str, Path]) -> dict[str, set[str]]:
    """Module -> the modules of ``found`` it imports, anywhere in its file."""
    graph: dict[str, set[str]] = {}
    for module, path in found.items():
        is_package = path.name == "__init__.py"
        edges: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            for target in _targets(module, is_package, node):
                parts = target.split(".")
                while parts and ".".join(parts) not in found:
                    parts.pop()
                if parts and (name := ".".join(parts)) != module:
                    edges.add(name)
        graph[module] = edges
    return graph


def layer_of(module: str, layers: Mapping[str, float]) -> float:
    if module == "agentrt.backends" or module.startswith("agentrt.backends."):
        return ADAPTERS
    name = mapped_name(module)
    assert name in layers, f"{name} is not in agentrt/__init__.py's map"
    return layers[name]


def upward(graph: Mapping[str, Iterable[str]], layers: Mapping[str, float]) -> list[str]:
    """Every import of a module from a higher layer than its own."""
    return sorted(
        f"{a} (L{layer_of(a, layers):g}) -> {b} (L{layer_of(b, layers):g})"
        for a, targets in graph.items()
        for b in targets
        if layer_of(b, layers) > layer_of(a, layers)
    )


def circles(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _mapped_modules(found: Mapping[str, Path]) -> set[str]:
    # What the map must name: every module of agentrt/ but an empty package __init__.
    return {
        mapped_name(m)
        for m, path in found.items()
        if not m.startswith("agentrt.backends")
        and not (path.name == "__init__.py" and m != "agentrt" and _is_empty(path))
    }


################################################################
# The tests
################################################################


def test_the_map_names_every_module_and_only_modules_that_exist() -> None:
    on_disk = _mapped_modules(modules())
    mapped = layer_map()
    assert sorted(on_disk - set(mapped)) == [], "modules missing from agentrt/__init__.py's map"
    assert sorted(set(mapped) - on_disk) == [], "the map names modules that do not exist"


def test_the_docs_table_is_the_same_map() -> None:
    assert docs_map() == layer_map()


def test_every_import_goes_to_the_same_layer_or_a_lower_one() -> None:
    assert upward(import_graph(modules()), layer_map()) == []


def test_no_import_circle() -> None:
    assert circles(import_graph(modules())) == []


def test_the_backends_import_agentrt_backend_alone() -> None:
    graph = import_graph(modules())
    strays = sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        if a.startswith("agentrt.backends.")
        for b in targets
        if b != "agentrt.backend" and not b.startswith("agentrt.backends")
    )
    assert strays == []


def test_the_stores_import_no_driver_module() -> None:
    # Storage does not spawn: what a store needs of processes (is a runtime gone?) the
    # runtime hands in, and the failure types it encodes live on the floor.
    graph = import_graph(modules())
    strays = sorted(
        f"{a} -> {b}"
        for a, targets in graph.items()
        if a.startswith("agentrt._stores.")
        for b in targets
        if b.startswith("agentrt._driver")
    )
    assert strays == []


# A module past this many lines holds more than one concept: split it by concept. The
# process driver is the one exception, a single concept (one CLI process, its I/O and its
# end) whose parts share its state.
MAX_LINES = 600
LONG_MODULES = {"agentrt._driver._process"}


def overlong(found: Mapping[str, Path]) -> list[str]:
    """Every module of ``found`` over `MAX_LINES` lines but `LONG_MODULES`, with its count."""
    return sorted(
        f"{module} ({count} lines)"
        for module, path in found.items()
        if (count := len(path.read_text().splitlines())) > MAX_LINES and module not in LONG_MODULES
    )


def test_no_module_is_over_600_lines_but_the_process_driver() -> None:
    assert overlong(modules()) == [], f"split by concept, to under {MAX_LINES} lines"


def test_an_overlong_module_is_named_with_its_count(tmp_path: Path) -> None:
    long, short = tmp_path / "long.py", tmp_path / "short.py"
    long.write_text("x = 1\n" * (MAX_LINES + 1))
    short.write_text("x = 1\n" * MAX_LINES)
    found = {"agentrt._long": long, "agentrt._short": short, "agentrt._driver._process": long}
    assert overlong(found) == [f"agentrt._long ({MAX_LINES + 1} lines)"]


def test_the_backend_contract_and_telemetry_import_the_floor_only() -> None:
    graph, layers = import_graph(modules()), layer_map()
    for module in ("agentrt.backend", "agentrt._telemetry._log_fields", "agentrt._telemetry._otel"):
        assert layer_of(module, layers) == 0, module
        assert sorted(b for b in graph[module] if layer_of(b, layers) != 0) == [], module


def _type_checking(node: ast.stmt) -> bool:
    """Whether ``node`` is an ``if TYPE_CHECKING:`` (or ``if typing.TYPE_CHECKING:``) block."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _top_level(path: Path) -> tuple[set[str], set[str], list[str]]:
    """What a module's top level binds: names imported ``as`` themselves (marked as
    exported; in a TYPE_CHECKING block too, for names the module imports on first use),
    other public names, and its ``__all__`` (``+=`` included)."""
    exported: set[str] = set()
    other: set[str] = set()
    listed: list[str] = []
    body = ast.parse(path.read_text()).body
    for node in [*body, *(n for block in body if _type_checking(block) for n in block.body)]:
        if isinstance(node, ast.ImportFrom | ast.Import):
            for alias in node.names:
                if alias.asname is not None and alias.asname == alias.name:
                    exported.add(alias.name)
                else:
                    other.add(alias.asname or alias.name)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            other.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id == "__all__":
                    assert isinstance(node.value, ast.List | ast.Tuple), path
                    listed += [ast.literal_eval(e) for e in node.value.elts]
                elif isinstance(target, ast.Name):
                    other.add(target.id)
    return exported, {n for n in other if not n.startswith("_")}, listed


def test_all_is_what_each_public_module_exports() -> None:
    # The face exports exactly what it imports as itself: nothing else is public there.
    exported, other, listed = _top_level(PACKAGE / "__init__.py")
    assert len(listed) == len(set(listed))
    assert sorted(listed) == sorted(exported)
    assert sorted(other) == []
    # The contracts (for backend and store authors) list what they define and what they
    # pass on, and no name they lack.
    for path in (PACKAGE / "backend.py", PACKAGE / "store.py"):
        if not path.exists():
            continue
        exported, other, listed = _top_level(path)
        assert len(listed) == len(set(listed)), path.name
        assert sorted(exported - set(listed)) == [], path.name
        assert sorted(set(listed) - exported - other) == [], path.name


def test_the_backends_are_installed_under_agentrt_only(tmp_path: Path) -> None:
    code = (
        "import importlib.util, agentrt.backends.claude, agentrt.backends.codex\n"
        "print(importlib.util.find_spec('backends') is None)\n"
    )
    assert _run(code, tmp_path) == ["True"]


def test_the_core_never_imports_the_command(tmp_path: Path) -> None:
    code = (
        "import sys, agentrt, agentrt.backend, agentrt.testing, agentrt._backends\n"
        "agentrt._backends.resolve_backend('claude'), agentrt._backends.resolve_backend('codex')\n"
        "print(sorted(m for m in sys.modules if m.startswith('agentrt._cli')))\n"
    )
    assert _run(code, tmp_path) == ["[]"]


def test_the_optional_parts_are_imported_by_what_uses_them(tmp_path: Path) -> None:
    # `import agentrt` (which every run of the `agentrt` command pays) leaves the operator
    # console's web stack and asyncio alone; the console's names load on first use.
    code = (
        "import sys, agentrt\n"
        "print(sorted(m for m in ('asyncio', 'agentrt._console._serve') if m in sys.modules))\n"
        "from agentrt import open_console\n"
        "print('agentrt._console._serve' in sys.modules, agentrt.Console.__module__)\n"
        "print(open_console.__module__, 'console_app' in dir(agentrt))\n"
    )
    assert _run(code, tmp_path) == ["[]", "True", "agentrt", "agentrt", "True"]


def _loaded(code: str, modules: Iterable[str], cwd: Path) -> list[str]:
    """Which of ``modules`` a fresh interpreter has imported after running ``code``."""
    shown = f"print('loaded:', *(m for m in {sorted(modules)!r} if m in sys.modules))"
    probe = f"{code}\nimport sys\n{shown}"
    words = _run(probe, cwd)
    return words[len(words) - words[::-1].index("loaded:") :]


# What each way of starting agentrt leaves unimported, until it is used: the package's names
# (one module each, imported when asked for), the parts of the runtime a program may never
# use, and for the command, everything but the command's own parser and the store it reads.
_RUNTIME = ("agentrt._runtime", "agentrt._actor", "agentrt._driver._process")
_OPTIONAL = ("agentrt._stores._postgres", "agentrt._stores._memory", "agentrt._console._serve")


def test_import_agentrt_imports_none_of_its_names(tmp_path: Path) -> None:
    names = ("agentrt._errors", "agentrt._events", "agentrt.backend", "trio", "attr", "msgspec")
    assert _loaded("import agentrt", [*names, *_RUNTIME, *_OPTIONAL], tmp_path) == []


def test_a_program_imports_the_optional_parts_it_uses_only(tmp_path: Path) -> None:
    code = "from agentrt import Agent, SQLiteStore, open_runtime"
    assert _loaded(code, [*_OPTIONAL, "agentrt._cli", "packaging"], tmp_path) == []
    code += "\nfrom agentrt import MemoryStore, PostgresStore"
    assert _loaded(code, _OPTIONAL, tmp_path) == sorted(_OPTIONAL[:2])


def test_the_command_imports_what_its_subcommand_uses(tmp_path: Path) -> None:
    unused = [*_RUNTIME, "agentrt._console._serve", "agentrt.backend", "agentrt._hooks"]
    parser = "import agentrt._cli as c\nc.build_parser()"
    assert _loaded(parser, [*unused, "agentrt._stores._sqlite", "trio"], tmp_path) == []
    # `status` reads the store: no runtime, no backend, no hook events.
    store = tmp_path / "sessions.sqlite3"
    status = f"import agentrt._cli as c\nc.main(['status', '--store', {str(store)!r}])"
    assert _loaded(status, [*unused, "agentrt._stores._sqlite"], tmp_path) == [
        "agentrt._stores._sqlite"
    ]


def test_the_wheel_lists_every_package_folder() -> None:
    # setuptools is given the packages by name (package-dir cannot be combined with
    # find), so a new subpackage missing from the list would be left out of the wheel only.
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {"agentrt": ROOT / "agentrt", **config["package-dir"]}
    found = {
        ".".join((name, *init.parent.relative_to(ROOT / folder).parts))
        for name, folder in folders.items()
        for init in (ROOT / folder).rglob("__init__.py")
    }
    assert sorted(config["packages"]) == sorted(found)


################################################################
# The architecture page's names against the code
################################################################

_CITED = re.compile(r"`([^`\s]+)`")
_DIAGRAM = re.compile(r"^```text\n(\S+(?: -> \S+)+)\n```$", re.MULTILINE)
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
# Cited in backticks but not names of agentrt's code: what the page says the code uses.
_NOT_AGENTRT = {
    "cgroup.kill",  # the kernel's file
    "git",  # the real program a workspace runs
    "importlib.metadata",
    "isinstance",
    "posix_spawn",
    "preexec_fn",
    "subprocess",
}


def _definitions(found: Mapping[str, Path]) -> tuple[dict[str, set[str]], set[str]]:
    """What the code defines: each class's names (its methods, fields and class-level
    assignments, its bases' by name included), and every other name it binds at a module's
    top level, in a class body or as an attrs field or a `Literal` value."""
    classes: dict[str, set[str]] = {}
    bases: dict[str, set[str]] = {}
    names: set[str] = set()
    for path in found.values():
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                own = classes.setdefault(node.name, set())
                bases.setdefault(node.name, set()).update(
                    b.id if isinstance(b, ast.Name) else b.attr
                    for b in node.bases
                    if isinstance(b, (ast.Name, ast.Attribute))
                )
                for item in node.body:
                    own.update(_bound(item))
                names.add(node.name)
                names.update(own)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                names.add(node.value)  # a Literal value, an option's name
        for item in tree.body:
            names.update(_bound(item))
    for name in classes:  # a class has its bases' names (those defined in the code)
        seen, todo = set(), [name]
        while todo:
            if (current := todo.pop()) not in seen:
                seen.add(current)
                todo.extend(bases.get(current, ()))
        classes[name] = set().union(*(classes.get(c, set()) for c in seen))
    return classes, names


def _bound(node: ast.stmt) -> Iterator[str]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        yield node.name
    elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        yield node.target.id
    elif isinstance(node, ast.Assign):
        yield from (t.id for t in node.targets if isinstance(t, ast.Name))
    elif isinstance(node, (ast.Import, ast.ImportFrom)):
        yield from (alias.asname or alias.name.split(".")[0] for alias in node.names)


def missing_names(text: str, root: Path = ROOT) -> list[str]:
    """Every module, file, ``Class.method`` and name the page cites in backticks that the
    code does not have."""
    found = modules(root)
    # A module by its name in the map, relative to agentrt or in full.
    mapped = {mapped_name(module): module for module in found} | {
        module.removeprefix("agentrt."): module for module in found
    }
    classes, names = _definitions(found)
    missing = []
    # The data path's diagram names modules, out of backticks.
    path = [name for block in _DIAGRAM.findall(text) for name in block.split(" -> ")]
    missing.extend(name for name in path if name not in mapped)
    for cited in dict.fromkeys(_CITED.findall(text)):
        if "/" in cited or cited.endswith((".py", ".toml", ".md")):
            if not any((base).glob(cited.rstrip("/")) for base in (root, root / "agentrt")):
                missing.append(cited)
        elif not _IDENTIFIER.fullmatch(cited) or cited in _NOT_AGENTRT:
            continue  # a value, a flag, a call with arguments
        elif cited.removeprefix("agentrt.") in mapped:
            continue
        elif "." in cited:
            owner, _, attribute = cited.rpartition(".")
            owner = "__init__" if owner == "agentrt" else owner.removeprefix("agentrt.")
            if owner in mapped:  # module.name
                if attribute not in set(_module_names(found[mapped[owner]])):
                    missing.append(cited)
            elif attribute not in classes.get(owner, set()):
                missing.append(cited)
        elif cited not in names:
            missing.append(cited)
    return missing


def _module_names(path: Path) -> Iterator[str]:
    # A TYPE_CHECKING block's names too: the package's, which it imports on first use.
    body = ast.parse(path.read_text()).body
    for node in [*body, *(n for block in body if _type_checking(block) for n in block.body)]:
        yield from _bound(node)


def test_the_architecture_page_cites_only_names_the_code_has() -> None:
    assert missing_names((ROOT / "docs" / "architecture.md").read_text()) == []


def test_a_name_gone_from_the_code_is_found() -> None:
    text = (
        "```text\n_turn -> _process -> _api\n```\n"
        "`_turn`, `Turn.run`, `_driver._lifecycle` `Actor._on_session`, `_no_such_module`, "
        "`no_such`, `agentrt.Runtime`, `agentrt.backend.Backend`, `agentrt.backend.Gone`"
    )
    assert missing_names(text) == [
        "_process",
        "Actor._on_session",
        "_no_such_module",
        "no_such",
        "agentrt.backend.Gone",
    ]


################################################################
# The tests that may import private modules
################################################################

TESTS = ROOT / "tests"

# The test files that use private modules of agentrt, each with the modules it may use
# (relative to agentrt): a module's own unit test, where the module is the subject (with
# the private types its inputs are made of), and the suite's harness. Every other test goes
# through agentrt, agentrt.lowlevel, agentrt.testing, agentrt.store, agentrt.backend,
# agentrt.hooks or a backend's package, so that moving a module breaks no behaviour test. A
# new unit test is listed here; a behaviour test that needs a private name needs a public
# one instead.
UNIT_TESTS: dict[str, tuple[str, ...]] = {
    "test_alarm.py": ("_alarm",),
    "test_approvals_answer.py": ("_approvals", "_asks"),
    "test_approvals_operator.py": ("_approvals",),
    "test_asyncio_bridge.py": ("_faces._asyncio_runtime", "_faces._sync_runtime", "_stream"),
    "test_backend_registry.py": ("_backends",),
    "test_claude_translate.py": ("backends.claude._failures",),
    "test_claude_hooks.py": ("backends.claude._hooks", "_agent"),
    "test_cli_versions.py": ("_versions",),
    "test_codex_translate.py": ("backends.codex._failures",),
    "test_codex_options.py": ("backends.codex._options",),
    "test_env.py": ("_env",),
    "test_events.py": ("_events",),
    "test_exceptiongroups.py": ("_exceptiongroups",),
    "test_fence_guard.py": ("_driver._fence_guard", "_driver._proctree"),
    "test_isolation.py": ("_driver._cgroup", "_driver._procfs", "_driver._proctree"),
    "test_kept_file.py": ("_driver._kept_file",),
    # The cgroup files the limits write; the kernel's oom_kill count is patched where no
    # memory controller is offered (the real-kernel tests skip there, saying why).
    "test_limits.py": ("_driver._limits", "_driver._cgroup", "_driver._process"),
    "test_lines.py": ("_driver._lines",),
    "test_operations.py": (
        "_operations",
        "_address",
        "_api",
        "_api_written",
        "_stores._route_codec",
    ),
    "test_options.py": ("_options",),
    "test_ownership.py": ("_cluster._ownership", "_driver._proctree"),
    "test_portable.py": ("_portable",),
    "test_process_kill.py": (
        "_driver._proctree",
        "_driver._process",
        "_driver._procfs",
        "_driver._lines",
    ),
    "test_recorder.py": ("_recorder", "_mailbox", "_options", "_slot"),
    "test_redact.py": ("_redact",),
    "test_restart.py": ("_restart",),
    "test_retention.py": ("_retention",),
    "test_route_codec.py": ("_stores._route_codec", "_stores._route_values"),
    "test_routed_streams.py": (
        "_follow",
        "_address",
        "_stores._route_codec",
        "_stores._route_values",
    ),
    "test_routing_sqlite.py": ("_stores._route_codec", "_stores._sqlite_router"),
    "test_runtimes.py": ("_driver._runtimes",),
    "test_segment.py": ("_segment",),
    "test_spawn.py": ("_driver._spawn", "_driver._cgroup"),
    "test_store_sqlite.py": ("_stores._sqlite_schema",),
    "test_telemetry.py": ("_telemetry._log_fields", "_telemetry._otel"),
    "test_turn_channel.py": ("_turn", "_options", "_retention"),
    "test_worktrees.py": ("_worktrees",),
    # The harness: the default store open_runtime() gets in a test, and the cgroups every
    # test's end checks for leftovers (its /proc reading is its own, tests/proc_helpers.py).
    "conftest.py": ("_runtime", "_driver._cgroup"),
    "worker_cgroup.py": ("_driver._cgroup", "_driver._procfs"),
    # Holds a runtime's spawn at its gate: the cgroup move is the one point to stop it at.
    "gate_host.py": ("_driver._cgroup",),
    # The stores' schema steps, which the upgrade tests go back through to an earlier version.
    "schema_steps.py": ("_stores._postgres", "_stores._sqlite_schema"),
}


def _is_private(module: str) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in mapped_name(module).split("."))


def private_uses(source: str, found: Mapping[str, Path]) -> set[str]:
    """The private modules of agentrt (and of its backends) that a test's ``source`` uses,
    relative to agentrt: imported (``from agentrt import _x`` too), reached as an attribute
    of ``agentrt``, or named as a ``setattr``/``delattr`` target (``monkeypatch.setattr
    ("agentrt._x.NAME", ...)``)."""
    names: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import | ast.ImportFrom) and not getattr(node, "level", 0):
            names.extend(_targets("tests", False, node))
        elif isinstance(node, ast.Attribute):
            parts, inner = [], node
            while isinstance(inner, ast.Attribute):
                parts.append(inner.attr)
                inner = inner.value
            if isinstance(inner, ast.Name) and inner.id == "agentrt":
                names.append(".".join(["agentrt", *reversed(parts)]))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("setattr", "delattr")
            and node.args
            and isinstance(target := node.args[0], ast.Constant)
            and isinstance(target.value, str)
        ):
            names.append(target.value)
    used = set()
    for name in names:
        parts = name.split(".")
        while parts and ".".join(parts) not in found:
            parts.pop()
        if parts and _is_private(module := ".".join(parts)):
            used.add(module)
    # `agentrt._a._b.NAME` is also the attributes `agentrt._a._b` and `agentrt._a`: the
    # module used is the innermost.
    return {mapped_name(m) for m in used if not any(o.startswith(f"{m}.") for o in used)}


def test_only_listed_unit_tests_use_private_modules() -> None:
    found = modules()
    used = {
        str(path.relative_to(TESTS)): uses
        for path in sorted(TESTS.rglob("*.py"))
        if (uses := private_uses(path.read_text(), found))
    }
    strays = {
        test: sorted(uses - set(UNIT_TESTS.get(test, ())))
        for test, uses in used.items()
        if uses - set(UNIT_TESTS.get(test, ()))
    }
    assert strays == {}, "use the public name, or list a module's own unit test"
    # The list holds no more than the tests use, so it cannot grow by stale entries.
    assert {test: sorted(set(m)) for test, m in UNIT_TESTS.items()} == {
        test: sorted(uses) for test, uses in used.items()
    }
    assert len(UNIT_TESTS) <= 41


def test_every_way_of_reaching_a_private_module_is_found() -> None:
    source = (
        "import agentrt\n"
        "import agentrt.testing\n"
        "import agentrt._alarm\n"
        "from agentrt import Agent, _backends\n"
        "from agentrt._driver import _cgroup\n"
        "from agentrt._stores._sqlite import SQLiteStore\n"
        "from agentrt.backends.claude._hooks import HOOK_EVENTS\n"
        "from . import _local\n"
        "agentrt._driver._proctree.marker_of\n"
        "agentrt.__file__\n"
        "def test(monkeypatch):\n"
        "    monkeypatch.setattr('agentrt._follow.HELD_EVENTS', 2)\n"
        "    text = 'agentrt._events'\n"
    )
    assert private_uses(source, modules()) == {
        "_alarm",
        "_backends",
        "_driver._cgroup",
        "_stores._sqlite",
        "backends.claude._hooks",
        "_driver._proctree",
        "_follow",
    }

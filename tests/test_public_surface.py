"""The public surface: one spelling per operation, names that say where they live, no public
constructors for what only the runtime makes, backends on public modules only."""

from __future__ import annotations

import ast
import importlib
import inspect
import pickle
import pydoc
import re
import subprocess
import sys
import traceback
import types
import typing
from pathlib import Path

import msgspec
import pytest
import trio
from _helpers import echo_backend
from doc_blocks import pages

import agentrt
import agentrt.asyncio
import agentrt.backend
import agentrt.hooks
import agentrt.lowlevel
import agentrt.sync
from agentrt import Agent, MemoryStore, open_runtime
from agentrt.testing import ScriptedBackend, reply

ROOT = Path(__file__).resolve().parent.parent

RUNTIME_METHODS = sorted(
    name
    for name, member in vars(agentrt.Runtime).items()
    if not name.startswith("_") and inspect.isfunction(member)
)


def _public(module: types.ModuleType) -> dict[str, object]:
    names = getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]
    return {name: getattr(module, name) for name in names}


# The modules whose names other public modules pass on.
HOMES = (agentrt, agentrt.hooks)


def _own(module: types.ModuleType) -> dict[str, object]:
    """`_public` without the names of agentrt and agentrt.hooks that the module passes on
    (agentrt.backend gives a backend the event types and the hook events, which live
    there)."""
    public = _public(module)
    if module in HOMES:
        return public
    return {
        name: obj
        for name, obj in public.items()
        if all(getattr(home, name, None) is not obj for home in HOMES)
    }


def test_every_runtime_method_has_a_module_level_twin() -> None:
    assert {"open_supervisor", "start_agent", "statistics", "stream"} <= set(RUNTIME_METHODS)
    for name in RUNTIME_METHODS:
        method = inspect.signature(getattr(agentrt.Runtime, name))
        unbound = method.replace(parameters=list(method.parameters.values())[1:])
        assert inspect.signature(getattr(agentrt, name)) == unbound, name
        assert getattr(agentrt, name).__doc__ == getattr(agentrt.Runtime, name).__doc__, name


@pytest.mark.parametrize("form", [agentrt.asyncio, agentrt.sync], ids=lambda m: m.__name__)
def test_the_asyncio_and_sync_runtimes_have_every_runtime_method(form: types.ModuleType) -> None:
    # Made from the trio method: the same parameters and docstring (the asyncio form's
    # coroutines return what the trio ones return; the sync form's return it at once).
    for name in RUNTIME_METHODS:
        ours, theirs = getattr(form.Runtime, name), getattr(agentrt.Runtime, name)
        assert list(inspect.signature(ours).parameters) == list(
            inspect.signature(theirs).parameters
        ), name
        if (form, name) != (agentrt.sync, "open_supervisor"):  # no thread to cancel: its own
            assert ours.__doc__ == theirs.__doc__, name
    for name in ("start_agent", "agents"):
        ours, theirs = getattr(form.Supervisor, name), getattr(agentrt.Supervisor, name)
        assert inspect.signature(ours) == inspect.signature(theirs), name
        assert ours.__doc__ == theirs.__doc__, name
    assert list(inspect.signature(form.open_runtime).parameters) == list(
        inspect.signature(agentrt.open_runtime).parameters
    )
    assert form.Runtime.__module__ == form.__name__
    with pytest.raises(TypeError, match=f"use {form.__name__}.open_runtime"):
        form.Runtime()


async def test_the_module_level_forms_that_were_missing_work() -> None:
    async with open_runtime(store=MemoryStore()):
        async with agentrt.open_supervisor(max_restarts=1) as supervisor:
            # A factory, as rt.start_agent takes it.
            await supervisor.start_agent(Agent, name="nested", backend=echo_backend())
            await agentrt.start_agent(lambda: Agent(), name="top", backend=echo_backend())
            assert agentrt.statistics().agents == 2
            assert (await agentrt.ask("nested", "x")).text == "echo x"
        assert agentrt.statistics().agents == 1


@pytest.mark.parametrize(
    ("module", "name"),
    [
        (agentrt, "agentrt"),
        (agentrt.lowlevel, "agentrt.lowlevel"),
        (agentrt.backend, "agentrt.backend"),
        (agentrt.hooks, "agentrt.hooks"),
        (agentrt.asyncio, "agentrt.asyncio"),
        (agentrt.sync, "agentrt.sync"),
    ],
)
def test_public_names_say_which_public_module_they_live_in(
    module: types.ModuleType, name: str
) -> None:
    for public, obj in _own(module).items():
        if isinstance(obj, type) or inspect.isfunction(obj):
            assert obj.__module__ == name, public
            assert getattr(module, obj.__qualname__) is obj, public  # so pickle finds it


_EVERY_NAME = """
import ast, importlib, inspect, sys
import agentrt.store  # first: the names it passes on still say agentrt
tree = ast.parse(open(agentrt.__file__).read())
[block] = [node for node in tree.body if isinstance(node, ast.If)]  # if TYPE_CHECKING:
seen = set()
for node in block.body:
    for alias in node.names:
        home = importlib.import_module(f"agentrt.{node.module}")
        obj = getattr(agentrt, alias.name)
        assert obj is getattr(home, alias.name), alias.name
        if isinstance(obj, type) or inspect.isfunction(obj):
            assert obj.__module__ == "agentrt", (alias.name, obj.__module__)
        seen.add(alias.name)
assert sorted(seen) == sorted(agentrt.__all__)
print("ok")
"""


def test_every_public_name_is_its_modules_own_in_a_fresh_interpreter() -> None:
    # `import agentrt` imports none of its names: each is imported on first use, and must be
    # the object the module the imports above name defines, under agentrt's name.
    result = subprocess.run(
        [sys.executable, "-I", "-c", _EVERY_NAME], capture_output=True, text=True, check=False
    )
    assert (result.stdout, result.stderr) == ("ok\n", "")


def _documented_names() -> set[str]:
    """Every word of README.md and the site's pages (a public name must be named there)."""
    text = "".join(p.read_text() for p in pages())
    return set(re.findall(r"\w+", text))


def test_all_is_every_public_name_and_each_is_documented() -> None:
    # dir(), not vars(): the console's names are loaded on first use (agentrt.__getattr__).
    public = {
        name
        for name in dir(agentrt)
        if not name.startswith("_") and not isinstance(getattr(agentrt, name), types.ModuleType)
    }
    assert sorted(agentrt.__all__) == sorted(public)
    star: dict[str, object] = {}
    exec("from agentrt import *", star)
    assert set(star) - {"__builtins__"} == public
    assert sorted(set(agentrt.__all__) - _documented_names()) == []


@pytest.mark.parametrize(
    "module",
    [agentrt, agentrt.lowlevel, agentrt.backend, agentrt.hooks, agentrt.asyncio, agentrt.sync],
    ids=lambda m: m.__name__,
)
def test_help_shows_every_public_name_in_its_public_module(module: types.ModuleType) -> None:
    pydoc.render_doc(module, renderer=pydoc.plaintext)  # the module's whole page
    for name, obj in _own(module).items():
        if isinstance(obj, str):
            continue  # a constant: pydoc would take it for a name to look up
        page = pydoc.render_doc(obj, renderer=pydoc.plaintext)
        if not (isinstance(obj, type) or inspect.isfunction(obj)):
            continue  # a type alias: typing's page
        assert page.splitlines()[0].endswith(f" in module {module.__name__}"), name
        # The name's own documentation sends no reader to a private module.
        assert re.findall(r"agentrt\._\w+", inspect.getdoc(obj) or "") == [], name
    assert "in module agentrt\n" in pydoc.render_doc(agentrt.open_runtime)


async def test_a_response_reprs_as_one_readable_line() -> None:
    text = "line one\n" + "word " * 100
    async with open_runtime(store=MemoryStore()) as rt:
        backend = ScriptedBackend(default=lambda call: reply(text, session_id="sid-1"))
        await rt.start_agent(Agent, name="a", backend=backend)
        response = await rt.ask("a", "hi")
    shown = repr(response)
    assert shown == str(response) and "\n" not in shown and len(shown) < 200
    assert shown.startswith("<agentrt.Response complete: 509 chars 'line one\\nword word")
    assert "..., session 'sid-1', 3 of 3 events kept, " in shown
    assert "_text" not in shown and "Event" not in shown  # no private field, no event dump


def test_a_traceback_names_the_public_exception() -> None:
    error = agentrt.AgentNotFound("a")
    assert traceback.format_exception_only(error)[0].startswith("agentrt.AgentNotFound:")
    assert agentrt.Runtime.ask.__module__ == "agentrt"


def test_public_values_still_pickle_and_decode() -> None:
    values = [
        agentrt.Ref("a", 1),
        agentrt.Withdrawn(),
        agentrt.StopReason.OVERLOADED,
        agentrt.Usage(input_tokens=3),
        agentrt.TextEvent(text="hi"),
    ]
    for value in values:
        assert pickle.loads(pickle.dumps(value)) == value
    # msgspec resolves a Struct's annotations where its __module__ points, after the fixup.
    for obj in _public(agentrt).values():
        if isinstance(obj, type) and issubclass(obj, msgspec.Struct) and obj is not agentrt.Event:
            msgspec.json.Decoder(obj)
    usage = agentrt.Usage(input_tokens=3)
    assert msgspec.json.decode(msgspec.json.encode(usage), type=agentrt.Usage) == usage


def test_the_process_driver_is_only_in_lowlevel() -> None:
    driver = ("open_cli_process", "ProcessTracker", "ProcessLimits", "ProcessFailure", "BadLine")
    for name in driver:
        assert not hasattr(agentrt, name), name
        assert hasattr(agentrt.lowlevel, name), name
    assert not hasattr(agentrt, "SessionTotals")
    assert agentrt.backend.SessionTotals.__module__ == "agentrt.backend"
    assert agentrt.backend.StopReason is agentrt.StopReason
    assert agentrt.backend.StopReason.__module__ == "agentrt"


def test_the_hook_events_are_in_agentrt_hooks_alone() -> None:
    # Moved before 0.1.0 with no alias (the changelog's rename policy): the old spelling
    # fails at once. The answers a handler returns stay beside the agent's other answers.
    events = {cls.__name__ for cls in agentrt.backend.HOOK_TYPES.values()}
    assert len(events) == len(agentrt.hooks.HOOK_KINDS) == 35
    assert sorted(agentrt.hooks.__all__) == sorted({*events, "Hook", "HookKind", "HOOK_KINDS"})
    for name in agentrt.hooks.__all__:
        with pytest.raises(AttributeError):
            getattr(agentrt, name)
        with pytest.raises(ImportError):
            exec(f"from agentrt import {name}", {})
    hook = agentrt.hooks.PreToolUseHook(tool_name="Bash")
    assert repr(hook).startswith("PreToolUseHook(") and type(hook).__module__ == "agentrt.hooks"
    assert pickle.loads(pickle.dumps(hook)) == hook
    assert agentrt.backend.Hook is agentrt.hooks.Hook  # what a backend builds them from
    assert {"Block", "AddContext", "Allow", "Deny"} <= set(agentrt.__all__)


async def test_runtime_and_supervisor_have_no_public_constructor() -> None:
    with pytest.raises(
        TypeError, match=r"agentrt\.Runtime has no public constructor.*open_runtime"
    ):
        agentrt.Runtime()
    with pytest.raises(TypeError, match=r"agentrt\.Supervisor .*open_supervisor"):
        agentrt.Supervisor()
    async with open_runtime(store=MemoryStore()) as rt:
        assert isinstance(rt, agentrt.Runtime)
        assert isinstance(rt.root, agentrt.Supervisor)
        await trio.lowlevel.checkpoint()


def test_backends_import_only_public_agentrt_modules() -> None:
    private = []
    for path in sorted((ROOT / "backends").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            modules = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            private += [
                f"{path.relative_to(ROOT)}: {m}" for m in modules if m.startswith("agentrt._")
            ]
    assert private == []


# A class (or exception) the reference pages render, and the members they render with it.
_AUTODOC = re.compile(r"^\.\. auto(?:class|exception):: (\S+)\n((?:   :[^\n]*\n)*)", re.M)


def _referenced() -> list[tuple[type, list[str]]]:
    found = []
    for page in sorted((ROOT / "docs" / "reference").glob("*.md")):
        for dotted, options in _AUTODOC.findall(page.read_text()):
            module, _, name = dotted.rpartition(".")
            cls = getattr(importlib.import_module(module), name)
            members = re.search(r":members:(.*)", options)
            if members is None:
                names = []
            else:
                names = [n.strip() for n in members.group(1).split(",") if n.strip()]
                names = names or [n for n in vars(cls) if not n.startswith("_")]
            found.append((cls, names))
    return found


def _private_classes(annotation: object) -> list[type]:
    inner = [c for arg in typing.get_args(annotation) for c in _private_classes(arg)]
    mine = isinstance(annotation, type) and annotation.__module__.startswith("agentrt._")
    return [annotation, *inner] if mine else inner  # type: ignore[list-item]


def test_the_reference_documents_what_it_shows_and_returns_only_public_types() -> None:
    referenced = _referenced()
    assert len(referenced) > 50  # the pages were read
    for cls, names in referenced:
        assert vars(cls).get("__doc__"), f"{cls.__qualname__}: no docstring of its own"
        for name in names:
            member = vars(cls).get(name)
            if isinstance(member, property):
                function = member.fget
            elif isinstance(member, classmethod | staticmethod):
                function = member.__func__
            elif inspect.isfunction(member):
                function = member
            else:
                continue  # a field, an enum member: the class's docstring says it
            where = f"{cls.__qualname__}.{name}"
            assert inspect.getdoc(getattr(cls, name)) or function.__doc__, f"{where}: no docstring"
            returned = typing.get_type_hints(function).get("return")
            assert _private_classes(returned) == [], f"{where} returns a private type"

"""The agent operations' one declaration (agentrt._operations) held against every place an
operation is spelled: the `Runtime`, the module-level API, the asyncio and sync forms, the
local and remote address, and the routed calls (whose kinds are made from it, and must
travel as routing protocol 1 always carried them)."""

from __future__ import annotations

import inspect
import re
import subprocess
import sys
import types
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

import agentrt
import agentrt.asyncio
import agentrt.sync
from agentrt import Ref, _api, _api_written
from agentrt._address import ROUTED, LocalAgent, RemoteAgent
from agentrt._operations import OPERATIONS, ROUTED_CALLS, RUNTIME_WIDE, Operation
from agentrt._stores import _route_codec as codec

PUBLIC = {name for name, op in OPERATIONS.items() if op.public} | RUNTIME_WIDE


def methods(cls: type) -> set[str]:
    """The public methods ``cls`` has, its own and its private bases' (`Runtime`'s agent
    calls come from `AgentCalls`)."""
    owners = [klass for klass in cls.__mro__ if klass.__module__.startswith("agentrt")]
    return {
        name
        for klass in owners
        for name, member in vars(klass).items()
        if not name.startswith("_") and inspect.isfunction(member)
    }


def functions(module: types.ModuleType) -> set[str]:
    """The public functions made in ``module``'s file (agentrt re-labels their module)."""
    return {
        name
        for name, member in vars(module).items()
        if not name.startswith("_")
        and inspect.isfunction(member)
        and member.__code__.co_filename == module.__file__
    }


def drift(declared: Iterable[str], present: Iterable[str]) -> dict[str, list[str]]:
    """What a form lacks of the declaration, and what it has that is not declared."""
    declared, present = set(declared), set(present)
    return {
        "declared but missing": sorted(declared - present),
        "present but undeclared": sorted(present - declared),
    }


NO_DRIFT = {"declared but missing": [], "present but undeclared": []}


def test_drift_names_both_directions() -> None:
    assert drift({"ask", "tell"}, {"ask", "shout"}) == {
        "declared but missing": ["tell"],
        "present but undeclared": ["shout"],
    }


@pytest.mark.parametrize(
    ("form", "present"),
    [
        ("agentrt.Runtime", methods(agentrt.Runtime)),
        ("agentrt.asyncio.Runtime", methods(agentrt.asyncio.Runtime)),
        # Its own ``close``: what leaving its ``with`` block does, callable without one.
        ("agentrt.sync.Runtime", methods(agentrt.sync.Runtime) - {"close"}),
        ("agentrt (module-level)", functions(_api)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_every_form_has_each_declared_operation_and_no_other(form: str, present: set[str]) -> None:
    assert drift(PUBLIC, present) == NO_DRIFT, form


def test_the_module_level_functions_are_exported() -> None:
    for name in PUBLIC:
        assert getattr(agentrt, name) is getattr(_api, name), name


def test_the_module_level_api_is_as_the_declaration_writes_it() -> None:
    stale = sorted(
        path.name for path, text in _api_written.rewritten().items() if path.read_text() != text
    )
    assert stale == [], f"written from the declaration: run `{_api_written.COMMAND}`"


def test_a_new_declared_operation_is_written_into_the_module_level_api(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What declaring an operation adds to the files the command writes, and nothing else.
    before = {path.name: text for path, text in _api_written.rewritten().items()}
    declared = {**OPERATIONS, "shout": Operation("shout", "name", (("text", "text"),))}
    monkeypatch.setattr(_api_written, "OPERATIONS", declared)
    after = {path.name: text for path, text in _api_written.rewritten().items()}
    added = {
        name: sorted((Counter(after[name].splitlines()) - Counter(text.splitlines())).elements())
        for name, text in before.items()
    }
    removed = [
        line
        for name, text in before.items()
        for line in (Counter(text.splitlines()) - Counter(after[name].splitlines())).elements()
    ]
    assert added == {
        "_api.py": ["shout = _on_current_runtime(Runtime.shout)"],
        "__init__.py": ['    "shout",', "    from ._api import shout as shout"],
    }
    assert removed == []


def test_the_reference_docs_list_each_module_level_function() -> None:
    # The page lists the package's other functions too (open_runtime, tool, ...).
    text = (Path(__file__).resolve().parent.parent / "docs" / "reference" / "api.md").read_text()
    listed = re.findall(r"^\.\. autofunction:: agentrt\.(\w+)$", text, re.M)
    assert drift(PUBLIC, listed)["declared but missing"] == []


def test_each_address_has_each_agent_operation_and_no_other() -> None:
    assert drift(OPERATIONS, methods(LocalAgent)) == NO_DRIFT, "LocalAgent"
    # `events` is the owner's side of a remote `stream` only.
    remote = {name for name, op in OPERATIONS.items() if op.public}
    assert drift(remote, methods(RemoteAgent)) == NO_DRIFT, "RemoteAgent"


def test_the_owner_serves_every_routed_operation_and_no_other() -> None:
    assert drift(ROUTED_CALLS, ROUTED) == NO_DRIFT
    assert drift([*ROUTED_CALLS, "cancel"], codec._CALLS) == NO_DRIFT
    assert drift(ROUTED_CALLS, codec._ANSWERS) == NO_DRIFT
    for name, method in ROUTED.items():
        assert method is getattr(LocalAgent, name), name


def _parameters(function: Any) -> list[str]:
    return list(inspect.signature(function).parameters)[1:]  # less self


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_each_operation_takes_its_declared_arguments_in_each_form(name: str) -> None:
    op = OPERATIONS[name]
    arguments = [argument for argument, _travels in op.arguments]
    on_agent = ["ref", *arguments] if op.by == "ref" else arguments
    addresses = [LocalAgent, RemoteAgent] if op.public else [LocalAgent]
    for address in addresses:
        method = getattr(address, name)
        assert _parameters(method) == on_agent, address
        assert inspect.iscoroutinefunction(method) == op.awaited, address
    if not op.public:
        return
    for form in (agentrt.Runtime, agentrt.asyncio.Runtime, agentrt.sync.Runtime):
        method = getattr(form, name)
        assert _parameters(method) == [op.by, *arguments], form
        awaited = op.awaited and form is not agentrt.sync.Runtime
        assert inspect.iscoroutinefunction(method) == awaited, form


# One value of each way an argument travels.
SAMPLES: dict[str, object] = {
    "prompt": "hello",
    "text": "plan",
    "text_or_none": None,
    "ref": Ref("a", 7),
    "event": {"k": [1, b"x", None]},
    "count": 3,
    "key": "job-1",
}


@pytest.mark.parametrize("name", sorted(ROUTED_CALLS))
def test_each_routed_operation_travels_as_declared(name: str) -> None:
    op = ROUTED_CALLS[name]
    sent = (
        *([SAMPLES["ref"]] if op.by == "ref" else []),
        *(SAMPLES[travels] for _argument, travels in op.arguments),
    )
    assert codec.decode_call(name, codec.encode_call(name, sent)) == sent


@pytest.mark.parametrize(
    ("call", "arguments", "row"),
    [
        # An ask without a key is protocol 1's row: the key is left out when None.
        ("ask", ("hi", None), "82a463616c6ca361736ba670726f6d7074a26869"),
        ("poll", (Ref("a", 7),), "82a463616c6ca4706f6c6ca372656682a46e616d65a161a2696407"),
        (
            "events",
            (Ref("a", 7), 3),
            "83a463616c6ca66576656e7473a372656682a46e616d65a161a2696407a5616674657203",
        ),
        (
            "notify",
            ({"k": [1, b"x", None]},),
            "82a463616c6ca66e6f74696679a56576656e7481a16b9301c40178c0",
        ),
        ("set_model", (None,), "82a463616c6ca97365745f6d6f64656ca56d6f64656cc0"),
        ("stop_task", ("t1",), "82a463616c6ca973746f705f7461736ba77461736b5f6964a27431"),
        ("interrupt", (), "81a463616c6ca9696e74657272757074"),
    ],
)
def test_call_kinds_made_from_the_declaration_are_protocol_1_s_rows(
    call: str, arguments: tuple[object, ...], row: str
) -> None:
    # The bodies as the hand-written call kinds encoded them before the declaration: a
    # host of either build reads the other's rows.
    envelope = "82a870726f746f636f6c01a4626f6479"
    assert codec.encode_call(call, arguments).hex() == envelope + row


# A user's module: each form's operations, made in a loop, type-check as the `Runtime`
# method's signature says (`agentrt._operations.operation`); the marked lines are errors.
USER_MODULE = """\
import agentrt
import agentrt.asyncio
import agentrt.sync
from agentrt import Response


async def on_trio(rt: agentrt.Runtime) -> Response:
    await rt.set_model("a", 1)  # error
    return await rt.ask("a", "hi")


async def on_asyncio(rt: agentrt.asyncio.Runtime) -> Response:
    await rt.set_model("a", 1)  # error
    return await rt.ask("a", "hi")


def on_sync(rt: agentrt.sync.Runtime) -> Response:
    rt.set_model("a", 1)  # error
    return rt.ask("a", "hi")


async def module_level() -> Response:
    await agentrt.set_model("a", 1)  # error
    return await agentrt.ask("a", "hi")
"""


def test_a_type_checker_checks_each_forms_calls_against_the_runtime_method(
    tmp_path: Path,
) -> None:
    user = tmp_path / "user.py"
    user.write_text(USER_MODULE)
    root = Path(__file__).resolve().parent.parent
    cache = tmp_path / "mypy_cache"
    checked = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", str(cache), str(user)],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    flagged = sorted(
        int(line.split(":")[1]) for line in checked.stdout.splitlines() if ": error:" in line
    )
    marked = [n for n, line in enumerate(USER_MODULE.splitlines(), 1) if line.endswith("# error")]
    assert flagged == marked, checked.stdout
    assert checked.stdout.count('expected "str | None"') == len(marked), checked.stdout

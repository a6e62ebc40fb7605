"""The one-place rules of the runtime's shape, held against the code: the mode types are
told apart only in agentrt/_mode.py, where the mode is chosen (everything else asks the
mode), and the store protocols are asked with isinstance only in agentrt/_stores/
_protocols.py, where `StoreCapabilities.of` resolves them once (everything else reads that
value), besides the runtime's check that a store is a store at all.

Read with `ast`, so a call in any function, branch or comprehension counts."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "agentrt"

MODES = {"InProcess", "OneShot", "Live"}
STORE_PROTOCOLS = {
    "SessionStore",
    "LiveProcessStore",
    "LeaseStore",
    "SpecStore",
    "TranscriptStore",
    "WorkspaceStore",
    "RoutingStore",
    "ApprovalStore",
    "TurnHistoryStore",
    "BudgetStore",
    "RequestStore",
}


def _isinstance_names(path: Path) -> Iterator[tuple[int, str]]:
    """(line, name) of each name an ``isinstance`` call in ``path`` tests against."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id == "isinstance"
            and len(node.args) == 2
        ):
            continue
        for part in ast.walk(node.args[1]):  # a tuple or a union of types too
            if isinstance(part, ast.Name):
                yield node.lineno, part.id
            elif isinstance(part, ast.Attribute):
                yield node.lineno, part.attr


def _asked(names: set[str]) -> set[str]:
    """``file:line name`` of every isinstance in agentrt on one of ``names``."""
    return {
        f"{path.relative_to(PACKAGE)}:{line} {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for line, name in _isinstance_names(path)
        if name in names
    }


def test_the_mode_types_are_told_apart_only_where_the_mode_is_chosen() -> None:
    elsewhere = {where for where in _asked(MODES) if not where.startswith("_mode.py:")}
    assert elsewhere == set()


def test_the_store_protocols_are_asked_only_where_the_capabilities_are_resolved() -> None:
    asked = _asked(STORE_PROTOCOLS)
    elsewhere = {where for where in asked if not where.startswith("_stores/_protocols.py:")}
    # The runtime refuses, as bad input, a store that is not a SessionStore at all.
    assert [where.split(" ")[1] for where in elsewhere] == ["SessionStore"], sorted(elsewhere)
    assert {where.split(":")[0] for where in elsewhere} == {"_runtime.py"}

"""A question for a person (`AskOperator`) whose program was killed while it waited: the
turn that would read the decision is gone, so the question must not stay answerable. A
real program (question_child.py) on a real SQLite file, the fake CLI asking its tool call,
SIGKILLed as the question waits."""

from __future__ import annotations

import time
from pathlib import Path

from proc_helpers import store_programs

from agentrt import SQLiteStore, open_runtime
from agentrt.store import OperatorDecision
from agentrt.testing import fake_cli_executable

CHILD = Path(__file__).parent / "question_child.py"
TOOL = {
    "subtype": "can_use_tool",
    "tool_name": "Bash",
    "input": {"command": "rm -rf build"},
    "tool_use_id": "toolu_1",
}
ALLOW = OperatorDecision(allowed=True, decided_by="console")


async def test_a_question_a_killed_program_left_is_neither_listed_nor_answered(
    tmp_path: Path,
) -> None:
    path = tmp_path / "s.sqlite3"
    binary = fake_cli_executable(str(tmp_path), ["live", {"turns": [[["ask", TOOL], ["answer"]]]}])
    async with store_programs(CHILD, str(path)) as start:
        program = await start(binary)
        asked = (await program.line()).removeprefix("ASKED ")
        await program.kill()
    # Another host's console cannot tell the program died: within its bound (600 s) the
    # question is listed; past it, neither listed nor decided.
    async with SQLiteStore(path) as console:
        assert [a.id for a in await console.pending_approvals()] == [asked]
    later = SQLiteStore(path, clock=lambda: time.time() + 601)
    async with later:
        assert await later.pending_approvals() == ()
        assert not await later.decide_approval(asked, ALLOW)
    # The next program on this host knows: its start takes the question away.
    async with open_runtime(store=SQLiteStore(path)) as rt:
        assert await rt.store.pending_approvals() == ()
        assert not await rt.store.decide_approval(asked, ALLOW)

"""The fixed cost of an ask, held to a budget of Python function calls (issue 37).

Timings drift with the machine and its load; a count of calls does not. Each test counts
the calls one ask makes, after warm-up: every Python function agentrt (or a backend, or an
attrs class of agentrt's) starts, and every Python function such code calls directly
(trio's, the standard library's). Calls the scheduler makes on its own, and coroutines
resumed rather than started, are not counted: how often a task waits depends on timing.
Garbage collection is off while counting, and the least count of a few asks is the one
held (an ask whose process happened to print in two reads is not the fixed cost). Each
scenario is counted in a new process: what the test process did before (the children it
left to reap, which the end of a CLI's turn looks through) is not an ask's cost.

A budget is the count measured when it was set, plus a little room. A failure means an
ask now does more work: find where (``python tests/test_call_budget.py`` prints each
scenario's calls by function; bench/README.md, "Issue 37", has the profile behind the
budgets) before raising it.
"""

from __future__ import annotations

import collections
import dis
import gc
import inspect
import json
import os
import subprocess
import sys
import types
import typing
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import trio

import agentrt
import agentrt.backends
from agentrt.testing import ScriptedBackend, fake_cli_executable, reply

# Counted when set (issue 37), and the room each has: a scripted ask is the same every
# time (160; 164 since durable requests: the mailbox's hand-off checks whether the store
# keeps the request, 2 calls on a MemoryStore; 161 since the in-process run's emit is the
# read's own coroutine and a turn without tool calls makes no loop watch; 164 since a
# request to a waiting agent is stored started in one write: the hand-off asks the slot
# whether it waits; 166 measured alone on this round's tree and on the last round's, 167
# once in a whole-suite run beside load, after other tests in the same worker; 153 since an
# in-process runner hands the frames it has as one read: one read a scripted reply, not
# three; 145 since an in-process agent keeps its frame source from its first turn and the
# slot's name is a field; 146 merged with this round's other work, and one more once in a
# run after other tests in the same worker, which the count's own process now rules out;
# 137 since an agent's CLI schedules are checked once per instance and its loop looks up
# no budget it does not have; 134 since a completed turn's Response is made without a
# keyword merge, an in-process run that has not waited moves no deadline at its result and
# the event log's offsets are made without a Python call);
# the fake CLI's turns vary with how the CLI's output is cut into reads and how the
# process's exit meets it (569-615 per turn, 293-305 warm on a quiet machine, 584-588 and
# 293-315 since the slot's name is a field, which saves them 6-9; beside two busy loops per
# core, up to 696 per turn and 334 warm before that; 440 warm once, in a test process
# whose main thread had 26 children to look through at the turn's end; per turn 596-600,
# then 498-500 at load 8-10 since the spawn encodes the environment in C, os.environ's copy
# is kept while unchanged and the end waits for no exit or stderr already there; warm
# 304-305 since the holder task of a warm process is not woken at each turn's end: what it
# did then, after the ask had returned and so uncounted, a turn's end now does itself, in
# the count).
SCRIPTED_BUDGET = 135
PER_TURN_BUDGET = 580
WARM_BUDGET = 325
# One streamed model call of Claude Code, translated: its message_start, a text delta, its
# message_delta and its assistant message (the usage repeated). 27 calls when set; 34
# before, when each usage priced the call by a scan of the model table (a generator, whose
# steps this count does not see); 29 once the running total moved through Usage's own
# plus and minus again (bench/README.md, "Sixth pass: 100 turns at once").
MODEL_CALL_BUDGET = 30

MEASURE = "python tests/test_call_budget.py"

_OURS = tuple(
    os.path.join(os.path.realpath(path), "")
    for path in (*agentrt.__path__, *agentrt.backends.__path__)
)
_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR
_RESUME = dis.opmap["RESUME"]

Site = tuple[str, int, str]


def _ours(code: types.CodeType) -> bool:
    filename = code.co_filename
    if filename.startswith("<attrs generated"):
        return " agentrt." in filename
    return filename.startswith(_OURS)


def _started(frame: types.FrameType) -> bool:
    # A coroutine or generator reports a "call" each time it resumes; it starts at the
    # RESUME instruction with argument 0 (a resumption's has another argument).
    code = frame.f_code
    if not code.co_flags & _RESUMABLE:
        return True
    at = frame.f_lasti
    return code.co_code[at] == _RESUME and code.co_code[at + 1] == 0


class CallCount:
    """A profile hook: the calls counted, by function."""

    def __init__(self) -> None:
        self.calls: collections.Counter[Site] = collections.Counter()

    def __call__(self, frame: types.FrameType, event: str, arg: object) -> None:
        if event != "call" or not _started(frame):
            return
        code = frame.f_code
        caller = frame.f_back
        if _ours(code) or (caller is not None and _ours(caller.f_code)):
            self.calls[code.co_filename, code.co_firstlineno, code.co_name] += 1

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    @property
    def protocol_checks(self) -> int:
        """isinstance checks against a runtime-checkable Protocol: each runs through the
        protocol's members (some 20 µs on Python 3.11, a tenth of a scripted ask), for an
        answer that a backend's or a store's class fixes: made once per agent, not per ask."""
        return sum(
            n
            for (filename, _, name), n in self.calls.items()
            if name == "__instancecheck__" and filename == typing.__file__
        )


@contextmanager
def counting() -> Iterator[CallCount]:
    count = CallCount()
    gc.collect()
    gc.disable()
    sys.setprofile(count)
    try:
        yield count
    finally:
        sys.setprofile(None)
        gc.enable()


async def least_count(
    ask: Callable[[], Awaitable[object]], *, warm_up: int = 3, asks: int = 5
) -> CallCount:
    """The counted calls of the cheapest of ``asks`` asks, after ``warm_up`` uncounted."""
    for _ in range(warm_up):
        await ask()
    counts = []
    for _ in range(asks):
        with counting() as count:
            await ask()
        counts.append(count)
    return min(counts, key=lambda c: c.total)


def report(count: CallCount, limit: int = 25) -> str:
    rows = [
        f"{n:5d}  {name} ({os.path.basename(filename)}:{line})"
        for (filename, line, name), n in count.calls.most_common(limit)
    ]
    return "\n".join(rows)


def check(scenario: str, budget: int) -> None:
    """Count ``scenario`` in a new process, and hold it to ``budget``."""
    done = subprocess.run(
        [sys.executable, __file__, scenario], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr
    counts, _, rows = done.stdout.partition("\n")
    total, checks = counts.split()
    assert int(checks) == 0, (
        f"one {scenario} checked a runtime-checkable Protocol {checks} times: check it once "
        f"per agent (CallCount.protocol_checks). Most called:\n{rows}"
    )
    assert int(total) <= budget, (
        f"one {scenario} made {total} counted calls, over its budget of {budget}. "
        f"Measure where they go ({MEASURE}; bench/README.md, 'Issue 37') before raising "
        f"the budget. Most called:\n{rows}"
    )


# --- the three asks --------------------------------------------------------------------

_SESSION = "s-1"
_TINY_TURN = "".join(
    json.dumps(frame) + "\n"
    for frame in (
        {"type": "system", "subtype": "init", "session_id": _SESSION, "model": "m", "tools": []},
        {
            "type": "assistant",
            "session_id": _SESSION,
            "message": {"content": [{"type": "text", "text": "ok"}]},
        },
        {"type": "result", "subtype": "success", "result": "ok", "session_id": _SESSION},
    )
)


async def scripted_ask() -> CallCount:
    backend = ScriptedBackend(default=lambda call: reply("ok", session_id=_SESSION), record=False)
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="a", backend=backend)
        return await least_count(lambda: rt.ask("a", "hi"))


async def cli_ask(directory: Path, *, warm: bool) -> CallCount:
    if warm:
        binary = fake_cli_executable(str(directory), ["live", {"turns": [[["answer"]]]}])
        options: dict[str, Any] = {"keep_alive": 600}
    else:
        # One write: the turn reaches the runtime in one read, whatever the machine's speed.
        binary = fake_cli_executable(str(directory), ["write", _TINY_TURN])
        options = {}
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        await rt.start_agent(agentrt.Agent, name="a", backend="claude", binary=binary, **options)
        return await least_count(lambda: rt.ask("a", "hi"))


# --- the guard -------------------------------------------------------------------------


def test_scripted_ask_stays_within_its_call_budget() -> None:
    check("scripted ask", SCRIPTED_BUDGET)


def test_per_turn_tiny_turn_stays_within_its_call_budget() -> None:
    check("per-turn tiny turn", PER_TURN_BUDGET)


def test_warm_tiny_turn_stays_within_its_call_budget() -> None:
    check("warm tiny turn", WARM_BUDGET)


def test_the_count_sees_an_ask_that_does_more() -> None:
    # The hook counts what agentrt's code calls: one call more in an ask is one more.
    async def ask() -> None:
        agentrt.StopReason("complete")  # a call from here: not counted
        await trio.lowlevel.checkpoint()

    async def ask_more() -> None:
        await ask()
        agentrt.testing.reply("ok")  # agentrt's function and what it calls

    async def counted(body: Callable[[], Awaitable[None]]) -> int:
        return (await least_count(body, warm_up=1, asks=2)).total

    plain, more = trio.run(counted, ask), trio.run(counted, ask_more)
    assert plain == 0
    assert more > 0


def _model_call(n: int) -> list[Any]:
    message = f"msg_{n}"
    usage = {
        "input_tokens": 3,
        "cache_creation_input_tokens": 4211,
        "cache_read_input_tokens": 12040 + n,
        "cache_creation": {"ephemeral_5m_input_tokens": 4211, "ephemeral_1h_input_tokens": 0},
        "output_tokens": 1,
        "service_tier": "standard",
    }
    model = "claude-sonnet-4-5-20250929"
    lines = [
        {"type": "message_start", "message": {"model": model, "id": message, "usage": usage}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "ok"}},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 9},
        },
    ]
    frames = [{"type": "stream_event", "event": e, "session_id": _SESSION} for e in lines]
    assistant = {
        "model": model,
        "id": message,
        "usage": usage,
        "content": [{"type": "text", "text": "ok"}],
    }
    frames.append({"type": "assistant", "message": assistant, "session_id": _SESSION})
    return [json.dumps(frame).encode() for frame in frames]


def test_a_model_calls_usage_stays_within_its_call_budget() -> None:
    # Claude Code reports each model call's usage as it grows, a few hundred calls in a long
    # turn; each is a usage event, priced. Counted in process: translation is pure.
    from agentrt.backends.claude import ClaudeTranslator

    translator = ClaudeTranslator()
    calls = iter(range(10))

    async def one_call() -> None:
        for line in _model_call(next(calls)):
            translator.feed(translator.decode(line))

    count = trio.run(least_count, one_call)
    assert count.total <= MODEL_CALL_BUDGET, (
        f"one model call's frames made {count.total} counted calls, over its budget of "
        f"{MODEL_CALL_BUDGET}. Measure where they go before raising it. Most called:\n"
        f"{report(count)}"
    )


def _scenarios(directory: Path) -> dict[str, Callable[[], Awaitable[CallCount]]]:
    return {
        "scripted ask": scripted_ask,
        "per-turn tiny turn": lambda: cli_ask(directory, warm=False),
        "warm tiny turn": lambda: cli_ask(directory, warm=True),
    }


if __name__ == "__main__":
    import tempfile

    # With a scenario's name (the guard's own call): its count, then its most called.
    # Without: every scenario's count and calls, to read.
    async def main(chosen: str | None) -> None:
        with tempfile.TemporaryDirectory() as directory:
            for scenario, run in _scenarios(Path(directory)).items():
                if chosen is None:
                    count = await run()
                    print(f"{scenario}: {count.total} calls\n{report(count, 60)}\n")
                elif scenario == chosen:
                    count = await run()
                    print(f"{count.total} {count.protocol_checks}\n{report(count)}")

    trio.run(main, sys.argv[1] if len(sys.argv) > 1 else None)

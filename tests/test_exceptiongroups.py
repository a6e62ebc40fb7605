"""The runtime's internal nurseries do not leak into the caller's exception types, nor does
what a supervisor's give-up caused in the block that owns it."""

from __future__ import annotations

import signal
import subprocess
import sys
import traceback

import pytest
import trio
from _helpers import echo_backend
from trio.testing import MockClock

from agentrt import (
    Agent,
    Ref,
    Response,
    RestartLimitExceeded,
    StopReason,
    TurnFailed,
    open_runtime,
)
from agentrt._exceptiongroups import collapse
from agentrt.testing import Fail, Gate


def _raise_in_body() -> None:
    try:
        raise KeyError("the context")
    except KeyError:
        raise TurnFailed(StopReason.CLI_ERROR, "from the body") from OSError("the cause")


async def test_an_exception_from_the_runtime_block_comes_out_as_itself() -> None:
    with pytest.raises(TurnFailed) as info:
        async with open_runtime():
            _raise_in_body()
    error = info.value
    assert type(error) is TurnFailed
    assert isinstance(error.__cause__, OSError)
    assert isinstance(error.__context__, KeyError)
    frames = [frame.name for frame in traceback.extract_tb(error.__traceback__)]
    assert "_raise_in_body" in frames


async def test_a_failed_ask_is_caught_by_its_own_type_around_the_block(
    autojump_clock: MockClock,
) -> None:
    caught: list[TurnFailed] = []
    try:
        async with open_runtime() as rt:
            await rt.start_agent(Agent, name="a", backend=echo_backend([Fail()]))
            await rt.ask("a", "x")
    except TurnFailed as error:
        caught.append(error)
    assert [error.reason for error in caught] == [StopReason.CLI_ERROR]


async def test_an_exception_from_a_nested_supervisor_block_comes_out_as_itself() -> None:
    async with open_runtime() as rt:
        with pytest.raises(TurnFailed) as info:
            async with rt.open_supervisor():
                _raise_in_body()
        assert isinstance(info.value.__context__, KeyError)


async def test_keyboard_interrupt_in_the_block_is_a_keyboard_interrupt() -> None:
    with pytest.raises(KeyboardInterrupt):
        async with open_runtime() as rt, rt.open_supervisor():
            raise KeyboardInterrupt


async def test_fail_after_around_the_block_raises_too_slow(autojump_clock: MockClock) -> None:
    with pytest.raises(trio.TooSlowError):
        with trio.fail_after(5):
            async with open_runtime():
                await trio.sleep_forever()
    assert trio.current_time() == 5.0


class CrashesOnItsAnswer(Agent):
    def handle_response(self, ref: Ref, response: Response) -> None:
        raise ValueError("bad answer")


async def test_a_give_up_leaves_the_runtime_block_as_itself(autojump_clock: MockClock) -> None:
    # The block awaits an ask of another agent when the runtime gives up: that ask ends with
    # AgentStopped (caused by the give-up) before the block is cancelled.
    with pytest.raises(RestartLimitExceeded) as info:
        async with open_runtime(max_restarts=0) as rt:
            await rt.start_agent(Agent, name="long", backend=echo_backend([Gate()]))
            await rt.start_agent(CrashesOnItsAnswer, name="a", backend=echo_backend())
            await rt.tell("a", "go")
            await rt.ask("long", "never answered")
    assert info.value.name == "a"


async def test_a_give_up_leaves_a_nested_supervisors_block_as_itself(
    autojump_clock: MockClock,
) -> None:
    async with open_runtime() as rt:
        await rt.start_agent(Agent, name="top", backend=echo_backend())
        with pytest.raises(RestartLimitExceeded) as info:
            async with rt.open_supervisor(max_restarts=0) as sup:
                await sup.start_agent(Agent, name="long", backend=echo_backend([Gate()]))
                await sup.start_agent(CrashesOnItsAnswer, name="a", backend=echo_backend())
                await rt.tell("a", "go")
                await rt.ask("long", "never answered")
        assert info.value.name == "a"
        assert (await rt.ask("top", "still")).text == "echo still"


def test_an_exception_caused_by_another_of_its_group_is_not_one_more() -> None:
    cause = _raised(ValueError("the cause"))
    consequence = _raised(KeyError("met by another task"))
    consequence.__cause__ = cause
    other = _raised(OSError("unrelated"))
    assert collapse(_raised(ExceptionGroup("g", [consequence, cause]))) is cause
    both = collapse(
        _raised(ExceptionGroup("g", [ExceptionGroup("i", [consequence]), cause, other]))
    )
    assert isinstance(both, ExceptionGroup) and both.exceptions == (cause, other)


def _raised(exc: BaseException) -> BaseException:
    try:
        raise exc
    except BaseException as caught:
        return caught


def test_groups_of_one_collapse_at_every_depth() -> None:
    inner = _raised(ValueError("one"))
    own = inner.__traceback__
    group = _raised(BaseExceptionGroup("outer", [BaseExceptionGroup("inner", [inner])]))
    assert collapse(group) is inner
    # The frames the group crossed come first, then the exception's own.
    assert inner.__traceback__ is not None and inner.__traceback__.tb_next is own


def test_several_exceptions_stay_a_group_without_nested_groups_of_one() -> None:
    first, second = ValueError("a"), KeyError("b")
    group = _raised(ExceptionGroup("outer", [first, ExceptionGroup("inner", [second])]))
    group.add_note("kept")
    collapsed = collapse(group)
    assert isinstance(collapsed, ExceptionGroup)
    assert collapsed.exceptions == (first, second)
    assert collapsed.__traceback__ is group.__traceback__
    assert collapsed.__notes__ == ["kept"]
    flat = ExceptionGroup("flat", [first, second])
    assert collapse(flat) is flat


# A program whose ask is under way when it gets SIGINT (Ctrl+C).
_CTRL_C = """
import trio, agentrt
from agentrt.testing import Gate, ScriptedBackend

class Reporter(agentrt.Agent):
    def handle_error(self, ref, error):
        print("handle_error", error.reason.value, flush=True)

async def main():
    gate = Gate()
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        await rt.start_agent(Reporter, name="a", backend=ScriptedBackend([gate]), watchdog=None)
        async with trio.open_nursery() as nursery:
            async def ready():
                await gate.wait_reached()
                print("ready", flush=True)
            nursery.start_soon(ready)
            await rt.ask("a", "long")

trio.run(main)
"""


def test_ctrl_c_during_an_ask_leaves_the_program_as_keyboard_interrupt() -> None:
    with subprocess.Popen(
        [sys.executable, "-c", _CTRL_C],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "ready\n"
            child.send_signal(signal.SIGINT)
            out, err = child.communicate(timeout=60)
        finally:
            child.kill()  # a failed check must not leave the `with` waiting for ever
    assert out == "handle_error cancelled\n"
    assert err.rstrip().endswith("KeyboardInterrupt")
    assert "ExceptionGroup" not in err

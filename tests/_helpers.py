"""Shared helpers for the runtime tests (ScriptedBackend + MockClock, no real sleeps)."""

from __future__ import annotations

import inspect
from typing import Any

import trio
import trio.testing

import agentrt
from agentrt.testing import Call, ScriptedBackend, reply


def echo(call: Call) -> list[object]:
    return reply(f"echo {call.prompt}")


def echo_backend(*scripts: Any) -> ScriptedBackend:
    """Runs the given scripts first, then answers every prompt with ``echo <prompt>``."""
    return ScriptedBackend(*scripts, default=echo)


async def settle() -> None:
    """Let every task run until all are blocked, without advancing the clock."""
    await trio.testing.wait_all_tasks_blocked()


class Recorder(agentrt.Agent):
    """Logs every callback as a tuple, in order."""

    def __init__(self) -> None:
        self.log: list[tuple[Any, ...]] = []

    def pre_turn(self, prompt: str) -> None:
        self.log.append(("pre_turn", prompt))

    def handle_stream_event(self, event: agentrt.Event) -> None:
        self.log.append(("stream", event.kind))

    def handle_response(self, ref: agentrt.Ref, response: agentrt.Response) -> None:
        self.log.append(("response", response.text))

    def handle_error(self, ref: agentrt.Ref, error: agentrt.TurnFailed) -> None:
        self.log.append(("error", error.reason))

    def post_turn(self, ref: agentrt.Ref, outcome: object) -> None:
        self.log.append(("post_turn", type(outcome).__name__))

    def handle_event(self, event: Any) -> None:
        self.log.append(("event", event))

    def terminate_agent(self, reason: str | BaseException) -> None:
        self.log.append(("terminate", reason))

    def only(self, kind: str) -> list[Any]:
        return [entry[1] for entry in self.log if entry[0] == kind]


def assert_implements(protocol: type, obj: object) -> None:
    """``obj`` has every member ``protocol`` declares, methods with the protocol's parameter
    names and kinds (mypy does not check the tests, so this is the runtime check)."""
    for name in getattr(protocol, "__annotations__", {}):
        assert hasattr(obj, name), f"{type(obj).__name__} has no attribute {name!r}"
    for name, member in vars(protocol).items():
        if name.startswith("_") or not callable(member):
            continue
        declared = list(inspect.signature(member).parameters.values())[1:]  # self
        actual = inspect.signature(getattr(obj, name)).parameters.values()
        assert [(p.name, p.kind) for p in actual] == [(p.name, p.kind) for p in declared], name

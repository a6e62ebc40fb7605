"""Module-level ``agentrt.ask`` etc.: the `Runtime` methods, on the innermost open runtime.

Each raises `NoRuntime` outside ``async with agentrt.open_runtime()``.
"""

from __future__ import annotations

from typing import Any

from ._agent import Agent
from ._events import Response
from ._requests import Cancelled, Completed, Failed, NotFound, PollResult, Ref
from ._runtime import current_runtime
from ._status import AgentHandle, AgentStatus
from ._stream import EventStream
from .backend import Backend


async def start_agent(
    agent: type[Agent] | Agent, *, name: str, backend: str | Backend, **options: Any
) -> AgentHandle:
    """`Runtime.start_agent` on the current runtime.

    Cancellation: safe; a cancelled start leaves no agent behind."""
    return await current_runtime().start_agent(agent, name=name, backend=backend, **options)


async def ask(name: str, prompt: str) -> Response:
    """`Runtime.ask` on the current runtime.

    Cancellation: cancels the request: a queued ask never runs; a running turn is
    stopped (``cancelled``) and the cancellation arrives once its processes are gone
    (shielded, bounded)."""
    return await current_runtime().ask(name, prompt)


def tell(name: str, prompt: str) -> Ref:
    """`Runtime.tell` on the current runtime."""
    return current_runtime().tell(name, prompt)


def poll(name: str, ref: Ref) -> PollResult:
    """`Runtime.poll` on the current runtime."""
    return current_runtime().poll(name, ref)


async def wait(ref: Ref) -> Completed | Failed | Cancelled | NotFound:
    """`Runtime.wait` on the current runtime.

    Cancellation: only the wait is cancelled; the tell goes on."""
    return await current_runtime().wait(ref)


def events(ref: Ref) -> EventStream:
    """`Runtime.events` on the current runtime."""
    return current_runtime().events(ref)


def notify(name: str, event: Any) -> None:
    """`Runtime.notify` on the current runtime."""
    current_runtime().notify(name, event)


def interrupt(name: str) -> bool:
    """`Runtime.interrupt` on the current runtime."""
    return current_runtime().interrupt(name)


def interrupt_request(name: str, ref: Ref) -> bool:
    """`Runtime.interrupt_request` on the current runtime."""
    return current_runtime().interrupt_request(name, ref)


def cancel(name: str, ref: Ref) -> bool:
    """`Runtime.cancel` on the current runtime."""
    return current_runtime().cancel(name, ref)


def halt(name: str) -> None:
    """`Runtime.halt` on the current runtime."""
    current_runtime().halt(name)


def resume(name: str) -> None:
    """`Runtime.resume` on the current runtime."""
    current_runtime().resume(name)


async def reset_session(name: str) -> None:
    """`Runtime.reset_session` on the current runtime.

    Cancellation: safe; the stored session may or may not be forgotten yet."""
    await current_runtime().reset_session(name)


def status(name: str) -> AgentStatus:
    """`Runtime.status` on the current runtime."""
    return current_runtime().status(name)


def agents() -> tuple[str, ...]:
    """`Runtime.agents` on the current runtime."""
    return current_runtime().agents()


def whereis(name: str) -> AgentHandle | None:
    """`Runtime.whereis` on the current runtime."""
    return current_runtime().whereis(name)


async def stop_agent(name: str) -> None:
    """`Runtime.stop_agent` on the current runtime.

    Cancellation: the agent still stops; only the wait for it is cut short."""
    await current_runtime().stop_agent(name)

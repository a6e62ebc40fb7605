"""The runtime's calls on an agent's live CLI (`ChannelCall`: ``set_model``,
``set_permission_mode``, ``context_usage``, ``stop_task``, ``steer``), written in band, and
the settings among them, which every later process of the agent gets again.

A setting made with no live process is only kept, for the next one. A ``steer`` goes only
into a turn the CLI has begun and not ended: written before the prompt, or after the turn's
end, it would be a turn of its own, which no caller reads.
"""

from __future__ import annotations

import logging
from typing import Any

import trio

from .._channel import SETTINGS, ChannelCall, ControlAnswer
from .._errors import ChannelError, InvalidOptions, NoTurnRunning
from ..backend import ProtocolError
from ._live import WarmCli

logger = logging.getLogger("agentrt")

# Bound on a live CLI's answer to a request of the runtime's (it answers at once).
_CALL_BOUND = 30.0
# The argument each call's refusal names.
_ARGUMENT = {
    "set_model": "model",
    "set_permission_mode": "permission_mode",
    "context_usage": "context_usage",
    "stop_task": "task_id",
    "steer": "text",
}


class ChannelCalls:
    """One agent instance's calls on its live CLIs, and the settings they made."""

    __slots__ = ("_agent", "_settings")

    def __init__(self, agent: str, settings: dict[ChannelCall, Any] | None) -> None:
        self._agent = agent
        # The settings changed in band: every new live process gets them again.
        self._settings = {} if settings is None else settings

    async def call(self, cli: WarmCli | None, call: ChannelCall, argument: Any) -> Any:
        """``call`` on the live ``cli``: its answer's value (None without a live process).

        Raises `InvalidOptions` when the CLI refuses it, `ChannelError` when no usable
        answer comes, `NoTurnRunning` for a ``steer`` with no turn to join."""
        if call == "steer" and (cli is None or not cli.steerable):
            await trio.lowlevel.checkpoint()
            raise NoTurnRunning(self._agent, call)
        if cli is None or cli.ending is not None or cli.proc is None:
            if call in SETTINGS:
                self._settings[call] = argument
            await trio.lowlevel.checkpoint()
            return None
        value = await self._request(cli, call, argument)
        if call in SETTINGS:
            self._settings[call] = argument
        return value

    async def _request(self, cli: WarmCli, call: ChannelCall, argument: Any) -> Any:
        request = cli.protocol.request(call, argument)  # type: ignore[attr-defined]
        got = await cli.call(request, _CALL_BOUND)
        if not isinstance(got, ControlAnswer):
            raise ChannelError(self._agent, call, got)
        if got.error is not None:
            if call == "steer":  # the turn ended as the message came (codex says so)
                raise NoTurnRunning(self._agent, call)
            raise InvalidOptions(_ARGUMENT[call], argument, f"the CLI refused it: {got.error}")
        try:
            return request.decode(got.payload)
        except ProtocolError as exc:
            cli.kill(f"it broke the live protocol: {exc}")
            raise ChannelError(self._agent, call, str(exc)) from None

    async def reapply(self, cli: WarmCli) -> None:
        """Make the settings changed since the agent's start again on ``cli``, a new process
        that started with the agent's options (before its first turn takes it)."""
        if not self._settings:
            return
        cli.in_turn = False  # not the turn's yet: its calls read their answers
        for call, argument in list(self._settings.items()):
            try:
                await self._request(cli, call, argument)
            except (InvalidOptions, ChannelError) as exc:
                del self._settings[call]
                logger.warning(
                    "agent %r: %s %r no longer holds: %s", self._agent, call, argument, exc
                )
        cli.in_turn = True

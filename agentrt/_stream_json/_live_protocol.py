"""The words every live CLI protocol shares: a stdout frame's role, and a broken protocol.

They stand below `agentrt.backend` (which exports them) so that the shared protocol pieces
the backend module also exports (`_stream_json._live`) can use them.
"""

from __future__ import annotations

from typing import Literal

from .._events import StopReason

# "task": news of the CLI's background tasks (started, updated, ended): a turn's event
# during a turn, and no turn's output between turns (the CLI starts no turn with it).
FrameRole = Literal["event", "end", "control", "task"]


class ProtocolError(Exception):
    """A live CLI broke its input protocol (an unexpected answer, a refused handshake): the
    runtime ends the process, and the conversation goes on in a new one (``--resume``).

    ``reason`` is the stop reason of the turn whose handshake it ends: `StopReason.
    MALFORMED_OUTPUT` unless the backend knows better, such as `StopReason.SESSION_LOST`
    for a session the CLI cannot open (so that ``on_session_lost`` applies)."""

    def __init__(self, message: str, *, reason: StopReason = StopReason.MALFORMED_OUTPUT) -> None:
        super().__init__(message)
        self.reason = reason

"""`log_error`: an error's traceback in the log, redacted."""

from __future__ import annotations

import logging
import traceback

from ._redact import redact

logger = logging.getLogger("agentrt")


def log_error(message: str, error: BaseException, agent: str | None = None) -> None:
    """Log ``message`` with ``error``'s traceback, redacted (an exception's text may carry
    secrets); ``agent`` names the agent outside its own task (whose records carry it)."""
    trace = "".join(traceback.format_exception(error))
    extra = None if agent is None else {"agent": agent}
    logger.error("%s\n%s", message, redact(trace.rstrip()), extra=extra)

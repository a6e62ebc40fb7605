"""What to do about a failure the command reports: a failed turn, by its stop reason, and a
CLI that is not installed."""

from __future__ import annotations

import datetime

from .._errors import CliNotFound, TurnFailed
from .._events import StopReason
from ._render import CliError, short

# What to do about a failed turn, by its stop reason; the sentence follows "Fix:".
FIXES: dict[StopReason, str] = {
    StopReason.AUTHENTICATION_FAILED: (
        "log the CLI in; `agentrt doctor` says how, and shows which credentials each env "
        "policy would use"
    ),
    StopReason.RATE_LIMITED: "wait for the provider's limit to reset, then try again",
    StopReason.USAGE_LIMIT: (
        "the login's usage limit is spent; try again once it resets, or use another login"
    ),
    StopReason.CREDENTIAL_EXPIRED: (
        "the CLI's login expired; log it in again (`agentrt doctor` says how for each backend)"
    ),
    StopReason.CONTEXT_EXHAUSTED: (
        "the conversation no longer fits the model's context; pass --new to start over"
    ),
    StopReason.OVERLOADED: "the provider is overloaded; try again in a minute",
    StopReason.REQUEST_TIMEOUT: (
        "the model API did not answer in time; try again, or raise the CLI's request timeout"
        " (API_TIMEOUT_MS for claude)"
    ),
    StopReason.SPAWN_FAILED: (
        "install the CLI, or point -o binary=PATH at it; `agentrt doctor` says how for each backend"
    ),
    StopReason.SESSION_LOST: "the CLI no longer has this conversation; pass --new to start over",
    StopReason.TOTAL_TIMEOUT: "allow the turn more time with -o watchdog=SECONDS",
    StopReason.STARTUP_TIMEOUT: "the CLI printed nothing; `agentrt doctor --smoke` tries a turn",
    StopReason.FIRST_EVENT_TIMEOUT: "raise -o first_event=SECONDS, or check the provider",
    StopReason.IDLE_TIMEOUT: "raise -o idle=SECONDS, or check the provider",
    StopReason.INVALID_OPTIONS: "check the -o KEY=VALUE options",
    StopReason.CLI_ERROR: "the CLI's own message is above; `agentrt doctor` checks the set-up",
    StopReason.STORE_FAILED: (
        "keep the store's file and directory in place while agents run (`agentrt doctor` "
        "checks the store), or use another with --store"
    ),
}
DEFAULT_FIX = "rerun with --debug for details, or check the set-up with `agentrt doctor`"


def cli_not_found(error: CliNotFound) -> CliError:
    """An agent's CLI that is not installed, with how to install it or point at it."""
    return CliError(f"cannot start {error.binary!r}: not found", FIXES[StopReason.SPAWN_FAILED])


def turn_failed(name: str | None, error: TurnFailed) -> CliError:
    """A failed turn as one sentence and its fix."""
    message = f"the turn failed ({error.reason.value})"
    if name is not None:
        message = f"agent {name!r}: {message}"
    if error.message:
        message += f": {short(error.message, 300).rstrip('.')}"
    tail = error.stderr_tail.strip()
    if tail and error.reason in (StopReason.PROCESS_CRASHED, StopReason.MALFORMED_OUTPUT):
        message += f"; the CLI's last words: {short(tail.splitlines()[-1], 200)}"
    fix = FIXES.get(error.reason, DEFAULT_FIX)
    resets_at = error.detail.get("resets_at")
    if isinstance(resets_at, int | float):
        at = datetime.datetime.fromtimestamp(resets_at, datetime.UTC)
        fix += f" (it resets at {at:%Y-%m-%d %H:%M} UTC)"
    return CliError(message, fix)

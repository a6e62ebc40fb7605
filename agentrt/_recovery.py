"""What a turn's outcome tells the runtime to do beyond the turn (issue 39): a usage limit
parks the agents of its credential, an expired login halts them, an answer shows the login
works again (`credential_outcome`); a full context runs the prompt once more after a
compaction or on a new session with a hand-off (`recover_context`); a lost session runs the
prompt once more on a new one (``on_session_lost="fresh"``). `Recovery` is what an agent
instance's actor asks after each turn.

Why ``"fresh"`` is the default for a full context: by the time a CLI says the context is
full, its own compaction (Claude Code's autocompact) has failed or could not run, so asking
the same session to compact again mostly fails again; a new session seeded with what the
old one wrote about the work keeps an unattended agent going, and the working tree holds
the rest.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import attrs

from ._channel import ContextUsage
from ._credentials import CredentialGroup
from ._errors import AgentRTError, InvalidOptions, TurnFailed
from ._events import Event, Response, StopReason
from ._mode import Mode
from ._options import AgentOptions, ContextPolicy, SessionLostPolicy
from ._requests import Request
from ._slot import Slot

logger = logging.getLogger("agentrt")

# What runs before the prompt runs again: "compact", the CLI's in-band compaction (Claude
# Code's command; a CLI without one answers it as a prompt, and the retry shows whether
# room was made); "fresh", the old session's hand-off for the new one.
COMPACT_PROMPT = "/compact"
HANDOFF_PROMPT = (
    "The context of this conversation is full, so the work goes on in a new session that "
    "sees nothing of this one. Write the hand-off for it: the task, what is done, what is "
    "left, the files, commands and decisions that matter. Reply with the hand-off only."
)

Outcome = tuple[Response | TurnFailed, Event | None]
# Runs one turn for a prompt; ``last``: the run whose outcome answers the request.
RunTurn = Callable[[str, bool], Awaitable[Outcome]]


@attrs.frozen
class Recovery:
    """What an agent instance runs again after a failed turn, and ahead of the next one."""

    slot: Slot
    options: AgentOptions
    # ``on_session_lost``: the agent's option, else its class's.
    on_session_lost: SessionLostPolicy
    # Runs one more turn for a prompt, settling the stored request given (None: none).
    run_turn: Callable[[str, Request | None], Awaitable[Outcome]]
    forget_session: Callable[[], Awaitable[None]]

    def runs_again(self, outcome: TurnFailed) -> bool:
        """Whether the failed turn's prompt runs once more (`run_again`): on a new session
        once its session was lost, or for a full context (`recovers_context`)."""
        return self._fresh_again(outcome) or recovers_context(
            self.options, self.slot.session_id, outcome
        )

    def _fresh_again(self, outcome: TurnFailed) -> bool:
        return outcome.reason is StopReason.SESSION_LOST and self.on_session_lost == "fresh"

    async def run_again(self, prompt: str, claimed: Request | None, outcome: TurnFailed) -> Outcome:
        """The prompt of the failed turn once more (where `runs_again`); the last run settles
        ``claimed``, and its outcome answers the caller (same ref) instead."""
        if self._fresh_again(outcome):
            await self.forget_session()
            return await self.run_turn(prompt, claimed)

        async def run(text: str, last: bool) -> Outcome:
            return await self.run_turn(text, claimed if last else None)

        return await recover_context(
            self.options.on_context_exhausted, prompt, run, self.forget_session
        )

    async def compact_ahead(self) -> None:
        """After an answered turn with ``compact_at`` (`compact_ahead`)."""

        async def run(text: str, last: bool) -> Outcome:
            return await self.run_turn(text, None)

        await compact_ahead(self.slot, self.options, run)


def credential_outcome(
    slot: Slot, options: AgentOptions, outcome: Response | TurnFailed
) -> CredentialGroup | None:
    """What the agent's turn says of its credential, for all its agents: a usage limit parks
    them (``on_usage_limit``), an expired login halts them (``on_credential_expired``), an
    answer shows an expired login works again. An agent alone on its credential gets its
    group now, when it first needs one. The group whose park or halt this changed, for the
    store to keep (`save_hold`), or None."""
    group, name = slot.credential, slot.name
    halts = options.on_credential_expired == "halt"
    parks = options.on_usage_limit == "park"
    if isinstance(outcome, Response):
        return group if group is not None and group.renewed() else None
    if outcome.reason is StopReason.USAGE_LIMIT and options.on_usage_limit == "park":
        group = group or alone(slot, halts=halts, parks=parks)
        resets_at = outcome.detail.get("resets_at")
        parked = group.usage_limit(resets_at if isinstance(resets_at, int | float) else None, name)
        return group if parked else None
    if outcome.reason is StopReason.CREDENTIAL_EXPIRED and halts:
        group = group or alone(slot, halts=halts, parks=parks)
        group.expire(outcome.message, name)
        return group
    return None


def alone(slot: Slot, *, halts: bool, parks: bool) -> CredentialGroup:
    """The agent's own credential group, made now (`CredentialGroup.alone`)."""
    group = slot.credential = CredentialGroup.alone(slot.name, slot, halts=halts, parks=parks)
    return group


def recovers_context(options: AgentOptions, session_id: str | None, outcome: TurnFailed) -> bool:
    """Whether a full context is recovered from (``on_context_exhausted``): on a session
    only (a turn that starts none has nothing to compact or hand off)."""
    return (
        outcome.reason is StopReason.CONTEXT_EXHAUSTED
        and options.on_context_exhausted != "fail"
        and session_id is not None
    )


async def recover_context(
    policy: ContextPolicy, prompt: str, run: RunTurn, forget_session: Callable[[], Awaitable[None]]
) -> Outcome:
    """The prompt whose turn found the context full runs once more, and its caller gets that
    answer: after a compaction of the session (``"compact"``: `COMPACT_PROMPT`), or on a
    new session whose first prompt carries the hand-off the old session wrote when asked
    (``"fresh"``; the prompt alone, said so, when it could write none; on the old session,
    kept, when the credential refused the hand-off). Each extra turn is a turn of its own
    in the history, its events in the request's stream."""
    if policy == "compact":
        await run(COMPACT_PROMPT, False)
        return await run(prompt, True)
    handoff, _ = await run(HANDOFF_PROMPT, False)
    if isinstance(handoff, TurnFailed) and handoff.reason in _HELD:
        # The credential refused the hand-off, not the session: the session is kept for a
        # hand-off once the credential works again, and the prompt meets the refusal too
        # (its caller learns it, and the park or halt follows).
        return await run(prompt, True)
    await forget_session()
    return await run(seeded(prompt, handoff), True)


# Failures of the credential rather than of the session (it parks or halts the agents).
_HELD = frozenset({StopReason.USAGE_LIMIT, StopReason.CREDENTIAL_EXPIRED})


def check_compaction(options: AgentOptions, mode: Mode) -> None:
    """`InvalidOptions` for ``compact_at`` on an agent without a warm CLI to ask how full
    its context is (``context_usage``)."""
    if options.compact_at is not None and not (mode.warm and "context_usage" in mode.calls):
        why = (
            f"compacting ahead needs a warm CLI that reports its context usage; this agent "
            f"runs {mode.name} turns (start it with keep_alive=SECONDS on a backend whose "
            "live CLI answers context_usage), or leave it to on_context_exhausted"
        )
        raise InvalidOptions("compact_at", options.compact_at, why)


async def compact_ahead(slot: Slot, options: AgentOptions, run: RunTurn) -> None:
    """After an answered turn of a warm agent (the caller answered): its CLI is asked how
    full the context is, and compacts it in band (`COMPACT_PROMPT`) once it reaches
    ``compact_at``, so the next request does not find it full."""
    limit = options.compact_at
    try:
        usage = await slot.channel_call("context_usage", None)
    except AgentRTError as exc:  # its CLI went meanwhile: the next turn finds out
        logger.warning("agent %r: context usage not had: %s", slot.name, exc)
        return
    if limit is None or not isinstance(usage, ContextUsage) or usage.percentage < 100 * limit:
        return
    logger.info(
        "agent %r: context %.0f%% full (%d of %d tokens): compacting ahead",
        slot.name,
        usage.percentage,
        usage.total_tokens,
        usage.max_tokens,
        extra={"agent": slot.name},
    )
    await run(COMPACT_PROMPT, False)


def seeded(prompt: str, handoff: Response | TurnFailed) -> str:
    """The first prompt of the session that goes on after a full one: ``prompt`` after the
    old session's hand-off, or after a note that it could write none."""
    if isinstance(handoff, Response) and handoff.text.strip():
        opening = (
            "You go on with work begun in an earlier session whose context filled up. "
            f"Its hand-off:\n\n{handoff.text.strip()}"
        )
    else:
        opening = (
            "You go on with work begun in an earlier session whose context filled up; it "
            "could write no hand-off, so look at the working tree for where it stands."
        )
    return f"{opening}\n\n---\n\n{prompt}"

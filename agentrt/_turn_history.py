"""What an agent's history keeps of one finished turn (`StoredTurn`): its times, outcome,
cost and usage always; its prompt and answer where the turn's retention kept its events
whole, redacted and cut to `HISTORY_TEXT` characters each."""

from __future__ import annotations

from ._errors import TurnFailed
from ._events import Response, StopReason, Usage
from ._records import StoredTurn
from ._redact import redact

# Characters of a prompt or an answer an entry keeps: a thousand entries an agent stay
# megabytes, not the gigabytes a fleet of long answers would make.
HISTORY_TEXT = 4000


# The usage of a turn that reported none, shared (a thousand entries an agent).
_NO_USAGE = Usage()

# Characters past the cut that are redacted with what is kept, so that a secret across the
# cut is seen whole (redacting costs time on the turn's path, by the character).
_MARGIN = 256


def kept_text(text: str) -> str:
    """``text`` redacted and cut to `HISTORY_TEXT` characters, saying how long it was.
    Only what can be kept is redacted (with `_MARGIN`), and before it is cut, so a secret
    is never cut into a part no pattern recognises."""
    head = redact(text[: HISTORY_TEXT + _MARGIN])
    if len(head) <= HISTORY_TEXT and len(text) <= HISTORY_TEXT + _MARGIN:
        return head
    return f"{head[:HISTORY_TEXT]}... [cut: {len(text)} characters in all]"


def history_entry(
    name: str,
    node: str,
    prompt: str,
    outcome: Response | TurnFailed,
    *,
    started_at: float,
    duration: float,
) -> StoredTurn:
    """The entry of a turn of agent ``name`` on ``node`` that started at ``started_at``
    (wall clock) and took ``duration`` seconds.

    The text is kept as retention keeps events: a Response whose events were all kept
    (``event_coverage.omitted == 0``: every lossless turn, a compact one that fitted)
    keeps its prompt and answer; a compact turn that left events out keeps neither, nor
    does a turn that overflowed a lossless log. A failed turn has no answer; its prompt is
    kept."""
    if isinstance(outcome, Response):
        whole = outcome.event_coverage.omitted == 0
        stop, answer = outcome.stop_reason, kept_text(outcome.text) if whole else None
    else:
        whole = outcome.reason is not StopReason.EVENT_CAPTURE_OVERFLOW
        stop, answer = outcome.reason, None
    return StoredTurn(
        name=name,
        node=node,
        started_at=started_at,
        ended_at=started_at + duration,
        duration=duration,
        outcome=stop.value,
        cost_usd=outcome.cost_usd,
        usage=outcome.usage or _NO_USAGE,
        prompt=kept_text(prompt) if whole else None,
        answer=answer,
    )

"""`Recorder`: what an agent's turns write to the session store, in one place.

The claim of the store's row (once the first turn starts), the session checkpoint, the
live process record the reaper reads (and whether that process idles between turns), the
turn's count and cost, the state blob. Only the checkpoint fails a turn (``store_failed``:
the session id would be lost); every other write that fails is logged and the agent goes
on, since only what the store shows is behind.
"""

from __future__ import annotations

import enum
import logging
from typing import cast

import attrs
import trio

from ._budget_spending import counted_tokens
from ._errors import StoreError, TurnFailed
from ._events import NO_TOTALS, Response
from ._logs import log_error
from ._requests import Request
from ._slot import Slot
from ._stores._protocols import LiveProcessStore, SessionStore, TurnHistoryStore
from ._turn_history import history_entry

logger = logging.getLogger("agentrt")

# Bound on the store write that clears a live process record after a stopped turn.
STORE_GRACE = 10.0


class _Live(enum.Enum):
    """What the store's live process record says, against what the CLI does."""

    NONE = "no record"
    TURN = "the CLI runs a turn"
    IDLE = "the CLI idles between turns"
    # The CLI idles, but the record still says it runs a turn: the next turn was queued.
    IDLE_DUE = "the CLI idles; the record says it runs a turn"


@attrs.define(eq=False)
class Recorder:
    """One agent instance's store bookkeeping, on its ``slot`` (its session, its state).

    Also what the process lifecycle records of its CLI processes (``spawned``, ``idle``,
    ``gone``: the ``ProcessRecords`` shape)."""

    slot: Slot
    store: SessionStore
    runtime_id: str
    node: str
    # Entries of the agent's turn history the store keeps (``turn_history``; 0: none).
    keep_turns: int
    # The store as a turn history (its `StoreCapabilities.turn_history`), where it keeps
    # one and the agent wants one.
    _history: TurnHistoryStore | None = attrs.field(alias="history")
    # The live process record in the store (the turn's CLI, or the warm one).
    _live: _Live = _Live.NONE
    # The store as live process records, resolved once (a warm turn writes them twice).
    _live_records: LiveProcessStore = attrs.field(init=False)
    # A turn has started on an unclaimed row: the row is owed, so the claim a failing store
    # refused is made again before a turn's record (which needs the row to count the turn
    # and settle its request in one transaction).
    _claim_owed: bool = attrs.field(default=False, init=False)

    def __attrs_post_init__(self) -> None:
        if self.keep_turns <= 0:
            self._history = None
        # start_agent refused an agent that runs processes on a store without live records.
        self._live_records = cast(LiveProcessStore, self.store)

    @property
    def idle_due(self) -> bool:
        """The warm CLI idles, but the record was not told (`parked` tells it)."""
        return self._live is _Live.IDLE_DUE

    async def started(self) -> None:
        """A turn starts (its CLI runs, or it runs in process): the first makes the store's
        row this agent's. A failure is logged; the turn goes on, its checkpoint claims the
        row (or fails the turn), and so do its record and the next turn's start."""
        if self.slot.unclaimed:
            self._claim_owed = True
            await self._claim()

    async def _claim(self) -> bool:
        """Claim the store's row (`Slot.claim`); whether it is written (a failure logged)."""
        try:
            await self.slot.claim()
        except Exception as exc:
            name = self.slot.name
            log_error(f"agent {name!r}: the session store could not record the agent", exc)
            return False
        return True

    async def checkpoint(self, session_id: str) -> None:
        """The turn's CLI names its session: the store keeps it before the next frame.

        Raises `StoreError` when the store cannot (the turn fails with store_failed)."""
        slot = self.slot
        if session_id != slot.session_id:
            slot.session_totals = NO_TOTALS
        slot.session_id = session_id
        slot.fork_source = None  # a fork has its own session now
        try:
            if slot.unclaimed:
                await slot.claim()
            else:
                await self.store.checkpoint_session(
                    slot.name, backend=slot.backend, session_id=session_id, cwd=slot.cwd
                )
        except StoreError as exc:
            log_error(
                f"agent {slot.name!r}: the session store could not keep session {session_id}; "
                "the turn fails (store_failed)",
                exc,
            )
            raise

    async def spawned(self, pid: int, pgid: int, start_time: int, marker: str | None) -> None:
        """A CLI process runs for the agent: the turn has started, and the reaper can find
        the process group if this program dies."""
        await self.started()
        # Set first: a cancelled write may still have reached the store, and clearing a
        # record that is not there is harmless.
        self._live = _Live.TURN
        slot = self.slot
        slot.cli_pid = pid
        logger.debug("agent %r: CLI started, pid %d", slot.name, pid, extra={"agent": slot.name})
        try:
            await self._live_records.set_live_process(
                slot.name,
                pgid=pgid,
                pid=pid,
                start_time=start_time,
                runtime_id=self.runtime_id,
                marker=marker,
            )
        except Exception as exc:
            # The turn goes on; only a reaper after a crash of this program would miss it.
            log_error(f"agent {slot.name!r}: the session store could not record a process", exc)

    async def idle(self, idle: bool) -> None:
        """The live CLI idles between turns (``idle``), or runs one. Writes only a change of
        a record that is there, and puts off an idle while the agent's next turn is queued
        (which would undo it at once): `parked` writes it if the agent parks instead."""
        live = self._live
        if not idle:
            if live is _Live.IDLE_DUE:
                self._live = _Live.TURN  # what the record says already
            elif live is _Live.IDLE:
                await self._write_idle(False)
        elif live is _Live.TURN:
            mailbox = self.slot.mailbox
            if mailbox.queue or mailbox.chained:
                self._live = _Live.IDLE_DUE
            else:
                await self._write_idle(True)

    async def parked(self) -> None:
        """The agent waits for work: a put-off idle is written now."""
        if self._live is _Live.IDLE_DUE:
            await self._write_idle(True)

    async def _write_idle(self, idle: bool) -> None:
        self._live = _Live.IDLE if idle else _Live.TURN
        try:
            await self._live_records.set_live_idle(self.slot.name, idle)
        except Exception as exc:
            # Only what `agentrt status` shows is behind.
            name = self.slot.name
            log_error(f"agent {name!r}: the session store could not record its CLI idle", exc)

    async def gone(self) -> None:
        """The live CLI process has ended: its record goes, also after a stop (shielded,
        within STORE_GRACE). Nothing to write if none was recorded."""
        if self._live is _Live.NONE:
            return
        self._live = _Live.NONE
        self.slot.cli_pid = None
        with trio.move_on_after(STORE_GRACE, shield=True):
            try:
                await self._live_records.clear_live_process(self.slot.name)
            except Exception as exc:
                name = self.slot.name
                log_error(f"agent {name!r}: the session store could not clear a process", exc)

    async def turn_ended(
        self,
        outcome: Response | TurnFailed,
        *,
        prompt: str,
        started_at: float,
        duration: float,
        settles: Request | None = None,
    ) -> None:
        """Count the turn, with its cost and usage, in the session's totals and the store's
        row, and keep its entry in the store's turn history, in one write (not for a turn
        that never started), which also settles the stored request ``settles``, with turn
        history kept or not. ``started_at`` is the wall clock when it started, ``duration``
        its seconds."""
        stop_reason = outcome.stop_reason if isinstance(outcome, Response) else outcome.reason
        # A failed turn is billed too; its cost is part of the session's running total.
        cost, usage = outcome.cost_usd, outcome.usage
        slot = self.slot
        name = slot.name
        slot.session_totals = slot.session_totals.add(usage, cost)
        slot.spent_usd += cost or 0.0
        slot.spent_tokens += counted_tokens(usage)
        budgets = slot.budgets
        if budgets.chain:  # most agents count against no budget
            budgets.charge(name, cost, usage)
        durable = slot.requests if settles is not None else None
        if slot.unclaimed and not (self._claim_owed and await self._claim()):
            # The turn never started (nothing to record), or the row it owes cannot be
            # written: the request's outcome is kept all the same, for every program to read.
            if durable is not None and settles is not None:
                await durable.settle(settles, outcome)
            return
        try:
            if durable is not None and settles is not None:
                # The turn's record and the request's outcome in one transaction; with no
                # history kept (keep 0), the record is the session row's count only.
                entry = history_entry(
                    name, self.node, prompt, outcome, started_at=started_at, duration=duration
                )
                keep = self.keep_turns if self._history is not None else 0
                await durable.settle(
                    settles, outcome, turn=entry, session_id=slot.session_id, keep=keep
                )
                return
            if self._history is not None:
                entry = history_entry(
                    name, self.node, prompt, outcome, started_at=started_at, duration=duration
                )
                await self._history.record_turn_with_history(
                    entry, session_id=slot.session_id, keep=self.keep_turns
                )
            else:
                await self.store.record_turn(
                    name,
                    stop_reason=stop_reason.value,
                    cost_usd=cost,
                    usage=usage,
                    session_id=slot.session_id,
                )
        except Exception as exc:
            # The turn's outcome stands; a store that cannot record it is reported.
            log_error(f"agent {name!r}: the session store could not record a turn", exc)

    async def save_state(self, blob: bytes | None) -> None:
        """Keep ``blob``, what ``checkpoint_state`` returned, encoded; unchanged state is
        not written again, and an unclaimed row gets it with the claim."""
        slot = self.slot
        if blob == slot.state_blob:
            return
        slot.state_blob = blob
        if slot.unclaimed:
            return  # written with the row, once a turn has started
        try:
            await self.store.save_state(slot.name, blob)
        except Exception as exc:
            # A restart in this program still gets the state (state_blob); a new program not.
            log_error(f"agent {slot.name!r}: the session store could not save its state", exc)

    async def forget_session(self) -> None:
        """The next turn starts a new session (the stored one is lost to the CLI)."""
        try:
            await self.slot.forget_session()
        except Exception as exc:
            # The next session id overwrites the stored one anyway.
            name = self.slot.name
            log_error(f"agent {name!r}: the session store could not forget a session", exc)

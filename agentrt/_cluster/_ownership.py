"""Ownership: the leases through which a runtime owns its agent names, renewed in the
background, and the fence that stops the agents whose lease could not be renewed in time.

A runtime takes the lease of a name before it starts the agent (`Ownership.acquire`), and
gives it back once the agent has ended for good (`Ownership.release_soon`); a release the
store could not take is tried again, before any renewal (the store renews every lease its
handle holds), until it goes through. A lease held by a dead runtime of the same node (its
pid and start time are checked) is taken at once; one of another node only once it has
expired on the store's clock.

Fencing rests on two clocks measuring the same span: the store's, on which a lease expires
``lease_ttl`` after the store granted or renewed it, and this runtime's own (trio's,
monotonic), on which a lease counts as valid for ``lease_ttl`` after the request was
*sent*, so never longer than on the store. Without a successful renewal for half of that
(`FENCE_SHARE`), the runtime stops the agent (``on_lost``): its CLI processes are SIGKILLed
at once, with no ladder (the name may pass to another runtime at the end of the other half,
or has already when the fence runs late: after a freeze, or a renewal that found it taken);
the agent's waiters get `AgentStopped` ("lease lost ...") and its supervisor does not
restart it. A renewal this runtime's loop never let start (the loop held past both its
time and the fence's) is made first (`_renew_overdue`): what nobody took is kept. A turn
whose CLI was killed by a signal agentrt did not send asks `settle` before it is reported:
a runtime frozen past its lease wakes to its fence guard's SIGKILL and its overdue fence at
once, and the fence runs for it first, so that a lost lease ends the turn as the lease lost
(``on_lost``), not as a crash.

On a store without leases (no `LeaseStore`) the runtime's names are a table of its own:
nothing is renewed, fenced or released in the store.
"""

from __future__ import annotations

import logging
import math
import os
import subprocess
import sys
from collections import deque
from collections.abc import Callable

import trio

from .._driver import _fence_guard
from .._driver._process import process_start_time
from .._driver._proctree import marker_prefix
from .._driver._runtimes import local_runtime_gone
from .._errors import AgentAlreadyStarted, InvalidOptions, StoreError
from .._records import Lease, LeaseOwner
from .._stores._protocols import LeaseStore, SpecStore
from .._util import finite_number
from ._specs import forget_spec

logger = logging.getLogger("agentrt")

DEFAULT_LEASE_TTL = 10.0
MIN_LEASE_TTL = 1.0
# Without a renewal for this share of lease_ttl the agents are stopped; the rest of the
# lease is for their kill ladders.
FENCE_SHARE = 0.5
# Renewals every lease_ttl / 5: two may fail before the fence.
RENEW_SHARE = 0.2


def lease_ttl_option(value: object) -> float:
    """``open_runtime``'s ``lease_ttl``, checked."""
    if not finite_number(value) or value < MIN_LEASE_TTL:
        raise InvalidOptions(
            "lease_ttl", value, f"must be a finite number of seconds >= {MIN_LEASE_TTL:g}"
        )
    return float(value)


def node_option(value: object) -> str:
    """``open_runtime``'s ``node``, checked."""
    if not isinstance(value, str) or not value.strip() or not value.isprintable():
        raise InvalidOptions("node", value, "must be a non-empty printable str naming the host")
    return value


def check_kill_grace(kill_grace: float, lease_ttl: float, *, key: str = "kill_grace") -> None:
    """A lost lease leaves ``lease_ttl * (1 - FENCE_SHARE)`` for the kill ladder (two
    ``kill_grace``, and a second to confirm): ``lease_ttl >= 4 x kill_grace + 2 s``. Refuse
    a pair that does not fit, as a bad ``key`` (the one of the two the caller was given)."""
    room = lease_ttl * (1 - FENCE_SHARE)
    ladder = 2 * kill_grace + 1.0
    if ladder <= room:
        return
    largest = (room - 1.0) / 2
    whose = " (open_runtime's, for its agents that give none)" if key == "lease_ttl" else ""
    raise InvalidOptions(
        key,
        kill_grace if key == "kill_grace" else lease_ttl,
        f"kill_grace={kill_grace:g} s{whose} does not fit lease_ttl={lease_ttl:g} s: the kill "
        f"ladder of an agent whose lease is lost (2 x kill_grace + 1 s = {ladder:g} s) must fit "
        f"in the other half of the lease ({room:g} s), so lease_ttl >= 4 x kill_grace + 2 s; "
        f"use a lease_ttl of at least {ladder / (1 - FENCE_SHARE):g} s"
        + (
            f", or a kill_grace of at most {largest:g} s"
            if largest > 0
            else " (no kill_grace fits a lease_ttl of 2 s or less)"
        ),
    )


def holder_ended(holder: Lease, node: str) -> bool:
    """Whether the runtime holding ``holder`` is one of ``node`` (this machine) that has
    ended: its process is gone, or its pid is another process's now (the start time is
    checked). A runtime takes such a name over at once; a holder of another node is only
    known gone once its lease expires."""
    return runtime_ended(holder.owner, node)


def runtime_ended(owner: LeaseOwner | None, node: str) -> bool:
    """Whether ``owner`` is a runtime of ``node`` that has ended (see `holder_ended`)."""
    if owner is None or owner.node != node:
        return False
    return local_runtime_gone(owner.runtime_id, owner.pid, owner.start_time)


class Ownership:
    """The leases of one runtime; `run` renews them and fences the ones it cannot renew.

    ``on_lost(name, reason)`` stops the agent of a lease that is lost (not renewed in
    time, or taken by another runtime). ``store`` is None on a store without leases;
    ``specs`` the store's failover specs (None without), removed before a retiring
    agent's lease is given back.
    """

    def __init__(
        self,
        store: LeaseStore | None,
        specs: SpecStore | None,
        *,
        node: str,
        runtime_id: str,
        ttl: float,
        on_lost: Callable[[str, str], None],
    ) -> None:
        pid = os.getpid()
        self.store = store
        self._specs = specs
        self.ttl = ttl
        self.owner = LeaseOwner(
            node=node, pid=pid, start_time=process_start_time(pid) or 0, runtime_id=runtime_id
        )
        self._on_lost = on_lost
        # Name -> when (trio clock) its grant was sent. A lease is fenced FENCE_SHARE of the
        # ttl after the later of that and the last renewal that went through (`_renewed`).
        self._held: dict[str, float] = {}
        # Renewals renew every lease at once, so the deadlines are kept in two parts, each
        # O(1) to look at: the leases the last renewal covered share one deadline; those
        # granted since, oldest first (the grant order is the deadline order), sit in
        # `_young` (an entry whose name was released or granted again meanwhile is skipped).
        self._renewed = -math.inf
        self._covered = False  # some held lease may be due at the renewal's deadline
        self._young: deque[tuple[float, str]] = deque()
        # What the fence sleeps until: only a sooner deadline wakes it.
        self._fence_at = math.inf
        # Lost: their agents are stopping; the store handle keeps fencing their writes.
        self._fenced: set[str] = set()
        # Their agents have ended; the release is on its way to the store (kept until it
        # goes through: a store that was down must still be told, or the handle would go
        # on renewing a lease no agent here uses).
        self._releasing: set[str] = set()
        # When a release that failed is tried again: at the renewals' pace, not in a loop.
        self._release_retry_at = -math.inf
        # Of those, the ones whose failover spec goes first (they ended for good).
        self._retiring: set[str] = set()
        # Lease calls one at a time, so a release never overtakes a grant of the same name.
        self._lock = trio.Lock()
        # Set for the renewer (a release wanted, a first lease) and for the fence (new times).
        self._wake_renewer = trio.Event()
        self._wake_fence = trio.Event()
        self._last_renewal = -math.inf
        # The fence guard (`_fence_guard`), started with the first lease of an agent that
        # runs CLI processes when other programs may share the store (`_guarded`): only
        # they can take a lease from a frozen runtime. On another store, with the first that
        # keeps background work, to kill its processes at this runtime's death only (no
        # next program reads that store to reap them); it is told no fencing deadlines.
        self._guarded = store is not None and store.shared_between_programs
        self._guard: trio.Process | None = None
        # Writes to the guard's stdin, one at a time: the fence's beats, the first lease's
        # beat and the closing runtime's exit can come from different tasks at once.
        self._guard_writes = trio.Lock()

    def holds(self, name: str) -> bool:
        return name in self._held

    async def settle(self, name: str) -> None:
        """Run the overdue fence (`_renew_overdue`, then `_fence`) before a turn of ``name``
        whose CLI was killed by a signal agentrt did not send is reported. A runtime frozen
        past its lease wakes to two things at once, its CLI's death (its fence guard's
        SIGKILL) and its overdue fence, whose renewal may wait for the store: the turn must
        not end as a crash first. A lease lost here stops the agent as the fence would
        (``on_lost``), before this returns; it ends with a checkpoint, where the agent's
        own task, so stopped, is cancelled. Nothing is waited for unless a fence is due.

        Cancellation: safe (as the fence's own wait for the overdue renewal)."""
        if self.store is not None and name in self._held:
            await self._renew_overdue()
            self._fence(trio.current_time())
        await trio.lowlevel.checkpoint()

    async def acquire(self, name: str, *, runs_processes: bool, background: bool = False) -> None:
        """Take the lease of ``name`` for this runtime; `AgentAlreadyStarted` names the live
        owner if another runtime holds it. An agent that ``runs_processes`` (CLI turns)
        gets the fence guard watching this runtime first, and the guard knows the lease's
        deadline before this returns; on a store no other program shares, only one that
        keeps ``background`` work, which would outlive this runtime's death.

        Cancellation: safe. The grant is shielded (bounded by the store's own timeouts), so
        a lease is either not granted or held here, where the caller's cleanup releases it."""
        async with self._lock:
            if runs_processes and (self._guarded or background) and self._guard is None:
                await self._start_guard()
            sent = trio.current_time()
            with trio.CancelScope(shield=True):
                await self._grant(name)
            self._releasing.discard(name)
            if self.store is None:
                self._held[name] = sent
                return
            first = not self._held
            if first:  # the renewals start from this grant
                self._last_renewal = sent
                self._wake_renewer.set()
            self._held[name] = sent
            self._young.append((sent, name))
            # A new grant is the last deadline, unless the fence sleeps for none at all.
            if sent + self.ttl * FENCE_SHARE < self._fence_at:
                self._wake_fence.set()
            if first:
                # The guard was told there was nothing to guard: it hears this deadline now,
                # before the caller can start a CLI, not at the fence's next beat (up to
                # lease_ttl / 5 away). A freeze in between would keep that CLI alive past the
                # lease, beside the next owner's.
                await self._beat()

    async def _grant(self, name: str) -> None:
        if self.store is None:  # names are this runtime's table (the caller checked it)
            return
        try:
            await self.store.acquire_lease(name, self.owner, ttl=self.ttl)
        except AgentAlreadyStarted as exc:
            holder = exc.holder
            if holder is None or not self.holder_gone(holder):
                raise
            assert holder.owner is not None
            logger.warning(
                "agent %r: taking it over from runtime %s (pid %d), which has ended",
                name,
                holder.owner.runtime_id,
                holder.owner.pid,
            )
            await self.store.acquire_lease(name, self.owner, ttl=self.ttl, replacing=holder.epoch)

    def holder_gone(self, holder: Lease) -> bool:
        """Whether a held lease's runtime is of this node and has ended."""
        owner = holder.owner
        if owner is not None and owner.runtime_id == self.owner.runtime_id:
            # This runtime's own lease of an agent that has ended, its release on the way.
            return holder.name in self._releasing
        return holder_ended(holder, self.owner.node)

    def owner_ended(self, owner: LeaseOwner) -> bool:
        """Whether the runtime ``owner`` is of this node and has ended: what a routed
        call's caller asks of the owner it waits on (the router is handed this check)."""
        return runtime_ended(owner, self.owner.node)

    def lost(self, name: str) -> bool:
        """Whether this runtime stopped the agent ``name`` because its lease was lost (and
        has not given the name back yet): what the agent held is the name's next owner's."""
        return name in self._fenced

    def release_soon(self, name: str, *, retire: bool = False) -> None:
        """The agent ``name`` has ended for good (its processes are gone): give its lease
        back, in the background; with ``retire``, after removing its failover spec."""
        held = self._held.pop(name, None) is not None
        if held or name in self._fenced:
            self._fenced.discard(name)
            self._releasing.add(name)
            if retire and held:  # a lost lease's spec is its new owner's
                self._retiring.add(name)
            self._wake_renewer.set()

    async def release(self, name: str) -> None:
        """`release_soon`, done before returning (so another runtime may take ``name`` now).

        Cancellation: safe; a release not made yet is left to the background."""
        self.release_soon(name)
        async with self._lock:
            # Not while the store's last refusal waits for its retry (in the background).
            if name in self._releasing and trio.current_time() >= self._release_retry_at:
                await self._release_names([name])

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Renew the leases, release the given-back ones and fence the expiring ones, until
        cancelled; start it with ``nursery.start``.

        Cancellation: this is how it stops; `release_all` gives back what is left."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._renew_forever)
            if self.store is not None:  # without leases none can be lost
                nursery.start_soon(self._fence_forever)
            task_status.started()

    async def _start_guard(self) -> None:
        # The guard watches this runtime, not the process: by the marker prefix the runtime's
        # `ProcessTracker` gives its turns, so the process's other runtimes' are spared.
        turns = marker_prefix(self.owner.runtime_id)
        argv = [sys.executable, "-I", "-S", _fence_guard.__file__, turns]
        self._guard = await trio.lowlevel.open_process(
            argv, stdin=subprocess.PIPE, start_new_session=True
        )
        await self._beat()

    async def _beat(self) -> None:
        """Tell the guard how long until this runtime would fence its agents itself."""
        guard = self._guard
        if guard is None or guard.stdin is None or not self._guarded:
            return  # not guarded: it waits for the runtime's death only (its deadline inf)
        left = self._soonest() - trio.current_time()
        try:
            await self._write_to_guard(guard.stdin, f"{max(left, 0.0)!r}\n".encode())
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            logger.error("the fence guard of this runtime has ended (%s)", guard.returncode)
            self._guard = None

    async def _write_to_guard(self, stdin: trio.abc.SendStream, line: bytes) -> None:
        """One write at a time (a beat still being written when the runtime closes), and
        bounded: a guard that stopped reading must hold up neither the fence nor the close."""
        with trio.move_on_after(1.0):
            async with self._guard_writes:
                await stdin.send_all(line)

    async def _stop_guard(self) -> None:
        """Tell the guard this runtime is closing, and see it end.

        Cancellation: shielded, bounded by about 6 s. A guard left running would take the
        end of its stdin (when its pipe is collected) for this runtime's death and kill."""
        guard, self._guard = self._guard, None
        if guard is None or guard.stdin is None:
            return
        with trio.CancelScope(shield=True):
            try:
                # A guard that stopped reading (the write gave up) is killed below.
                await self._write_to_guard(guard.stdin, b"exit\n")
                await guard.stdin.aclose()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            with trio.move_on_after(5.0):
                await guard.wait()
            if guard.returncode is None:
                guard.kill()
                await guard.wait()

    async def release_all(self) -> None:
        """Give back every lease this runtime still has (its agents have ended).

        Cancellation: bounded by the caller; what is not released expires. The guard is
        told and ended all the same (`_stop_guard`)."""
        self._releasing |= self._held.keys() | self._fenced
        self._held.clear()
        self._fenced.clear()
        try:
            async with self._lock:
                await self._release_pending()
        finally:
            await self._stop_guard()

    async def _renew_forever(self) -> None:
        while True:
            # A new event before the state is read: a change after it sets this one.
            wake = self._wake_renewer = trio.Event()
            renews = bool(self._held) and self.store is not None
            due = self._last_renewal + self.ttl * RENEW_SHARE if renews else math.inf
            releases = self._release_retry_at if self._releasing else math.inf
            with trio.move_on_at(min(due, releases)):
                await wake.wait()
            async with self._lock:
                renewing = bool(self._held) and trio.current_time() >= due
                if renewing:
                    await self._release_then_renew()
                elif trio.current_time() >= self._release_retry_at:
                    await self._release_pending()

    async def _release_then_renew(self) -> None:
        # The releases owed go first: a renewal must not extend a lease no agent here uses
        # (the handle renews every lease it still holds). The caller holds the lock.
        await self._release_pending()
        await self._renew()

    async def _release_pending(self) -> None:
        if self._releasing:
            await self._release_names(list(self._releasing))

    async def _release_names(self, names: list[str]) -> None:
        """Give back the leases of ``names`` in one store call (a shutdown of thousands of
        agents must not keep the leases still held from their renewal, which the fence
        would take for a loss); the retiring ones' specs go first, while still fenced by
        the lease about to be given up."""
        for name in names:
            if name in self._retiring:
                self._retiring.discard(name)
                await forget_spec(self._specs, name)
        try:
            if self.store is not None:
                await self.store.release_leases(names)
        except StoreError as exc:
            # Kept, and tried again at the renewals' pace and before each renewal: the
            # handle may still hold (and would renew) what it could not give up.
            retry = self.ttl * RENEW_SHARE
            self._release_retry_at = trio.current_time() + retry
            logger.warning(
                "%d agents' leases could not be released (%s); trying again in %g s",
                len(names),
                exc,
                retry,
            )
        else:
            self._releasing.difference_update(names)
            self._release_retry_at = -math.inf

    async def _renew(self) -> None:
        assert self.store is not None
        sent = self._last_renewal = trio.current_time()
        try:
            lost = await self.store.renew_leases(ttl=self.ttl)
        except StoreError as exc:
            logger.warning("the leases of this runtime could not be renewed: %s", exc)
            return
        for name in lost:
            if name in self._held:
                self._lose(name, "another runtime holds it now")
        # Every lease granted before it is renewed (grants wait for the lock it holds).
        self._renewed = sent
        self._covered = bool(self._held)
        self._young.clear()
        self._wake_fence.set()  # for the guard's next beat; the deadlines only moved later

    def _soonest(self) -> float:
        """The earliest fencing deadline of the held leases (inf: none)."""
        young = self._young
        while young and self._held.get(young[0][1]) != young[0][0]:
            young.popleft()  # released or granted again since
        soonest = self._renewed if self._covered else math.inf
        if young:
            soonest = min(soonest, young[0][0])
        return soonest + self.ttl * FENCE_SHARE

    async def _fence_forever(self) -> None:
        while True:
            wake = self._wake_fence = trio.Event()
            soonest = self._soonest()
            if self._guard is not None and self._guarded:  # it hears from us every ttl / 5
                soonest = min(soonest, trio.current_time() + self.ttl * RENEW_SHARE)
            self._fence_at = soonest
            with trio.move_on_at(soonest):
                await wake.wait()
            await self._renew_overdue()
            self._fence(trio.current_time())
            # After the fence has run: a guard that fired while we were frozen stops here.
            await self._beat()

    async def _renew_overdue(self) -> None:
        """Before fencing: the renewal of leases whose last one was sent in time, and none
        since until their fence time had passed. This loop was held (a process starved of
        CPU beside a busy machine, a long step): the renewer had no turn to try. Its renewal,
        under way or made here, is waited for (a renewal's interval at most): it keeps the
        leases nobody took meanwhile; the store reports those another runtime holds, lost
        as at any renewal. A renewal that was tried in time and failed, or still waits for
        the store, is not waited for: its leases are fenced on time.

        Two owners still never run one agent: the lease is this runtime's on the store for
        the other half of it; a hold that outlasts it finds a shared store's fence guard
        has killed the CLIs already (and a taker is reported)."""
        deadline = self._soonest()
        if not self._held or deadline > trio.current_time():
            return
        if self._renewed < self._last_renewal < deadline:
            return  # tried in time: failed, or waiting for the store
        with trio.move_on_after(self.ttl * RENEW_SHARE):
            async with self._lock:
                # The renewer's late renewal may have gone through (or failed) meanwhile.
                if self._soonest() <= trio.current_time() and self._last_renewal < deadline:
                    await self._release_then_renew()

    def _fence(self, now: float) -> None:
        """Stop the agents of the leases due by ``now``."""
        share = self.ttl * FENCE_SHARE
        why = f"not renewed for {share:g} s (half of lease_ttl={self.ttl:g} s)"
        if self._covered and self._renewed + share <= now:
            # The last renewal's deadline: every lease it covered is due, once.
            self._covered = False
            for name, sent in list(self._held.items()):
                if sent <= self._renewed:
                    self._lose(name, why)
        young = self._young
        while young and young[0][0] + share <= now:
            sent, name = young.popleft()
            if self._held.get(name) == sent:
                self._lose(name, why)

    def _lose(self, name: str, why: str) -> None:
        del self._held[name]
        self._fenced.add(name)
        reason = f"lease lost: {why}"
        logger.error("agent %r: %s; stopping it (its CLI is killed)", name, reason)
        self._on_lost(name, reason)

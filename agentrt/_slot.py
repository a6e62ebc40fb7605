"""`Slot`: the one owner of an agent's state, kept per name across its instances.

A slot holds what outlives an `Actor` (the mailbox, the session, the state blob, halted,
the turn and restart counts) and what the running instance is doing (its request and
turn), so every operation other tasks call on an agent has one implementation, whether
an instance runs or its supervisor is restarting it. Each instance borrows the slot and
changes it in place: a restart hands nothing over.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import attrs
import trio

from ._arguments import check_prompt
from ._budgets import NO_BUDGETS, Budgets
from ._channel import SETTINGS, ChannelCall
from ._credentials import CredentialGroup
from ._driver._lifecycle import CliLifecycle
from ._durable import Durable
from ._errors import AgentBusy, InvalidOptions, NoTurnRunning
from ._events import NO_TOTALS, SessionTotals, StopReason
from ._mailbox import Mailbox
from ._mode import ONE_SHOT, Mode
from ._options import WhenBusy
from ._requests import Origin, Ref, Request
from ._status import AgentHandle, AgentState, AgentStatus, CurrentRequest
from ._stores._protocols import SessionStore
from ._turn import Turn

ASK_CANCELLED = "the caller of ask was cancelled"


@attrs.define(eq=False)
class Slot:
    mailbox: Mailbox
    store: SessionStore
    backend: str  # the backend's name, as the store's row names it
    # The working directory the CLI runs in (absolute): where it keeps the transcript.
    cwd: str | None
    session_id: str | None = None
    # A fork (start_agent(fork_from=...)) before its first session: the session its first
    # turn forks; cleared once the fork's own session id is checkpointed.
    fork_source: str | None = None
    # What this session's turns reported so far; zero for a new session.
    session_totals: SessionTotals = NO_TOTALS
    # The last state blob saved (restored or checkpointed), so unchanged state is not
    # written again and a restarted instance gets it back.
    state_blob: bytes | None = None
    # The store's row does not name this backend yet (a new name, or a start on another
    # backend): the first turn that starts writes it, with the state; until then nothing
    # is written, so a turn that cannot even spawn its CLI changes nothing stored.
    unclaimed: bool = False
    # What the name has spent (the store's totals at the start, then each turn's), and
    # the budgets with a limit its turns count against (its own first, if it has one).
    spent_usd: float = 0.0
    spent_tokens: int = 0
    budgets: Budgets = NO_BUDGETS
    turns: int = 0
    restarts: int = 0
    halted: bool = False
    halt_pending: bool = False
    # Why the agent halted when the runtime halted it (its login expired), not `halt`.
    halt_reason: str | None = None
    # The agents of its credential (_credentials); None until its start joins it.
    credential: CredentialGroup | None = None
    # The running instance's handle; None while its supervisor restarts it.
    handle: AgentHandle | None = None
    # How the last instance started runs its turns (a restarted one may run otherwise).
    mode: Mode = ONE_SHOT
    current: Request | None = None
    turn: Turn | None = None
    # The pid of the agent's live CLI process: its turn's, or its warm one's.
    cli_pid: int | None = None
    # A warm instance's live CLI, for the runtime's requests to it (`channel_call`), and
    # the settings those changed, which hold for its later processes and instances.
    channel: CliLifecycle | None = None
    # None until a setting changes: an idle agent holds no dict for it.
    _channel_settings: dict[ChannelCall, Any] | None = None
    # The version the latest turn's CLI reported (AgentStatus.cli_version).
    cli_version: str | None = None
    _current_since: float = 0.0
    # The instance's task while it waits for work.
    _parked: trio.lowlevel.Task | None = None
    # While its work waits for the credential to admit a turn (`wait_for_admission`): it
    # waits for events then, and a request that arrives queues behind that work.
    admitting: bool = False
    # Set when the running turn has ended (its processes gone), for a cancelled asker.
    _turn_over: trio.Event | None = None
    # On a store that keeps requests: the agent's requests there (None: in memory only).
    requests: Durable | None = None
    # What a prompt that arrives during a turn does (AgentOptions.when_busy).
    when_busy: WhenBusy = "enqueue"
    # The agent's name, read on every ask: kept here rather than looked up in the mailbox.
    name: str = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.name = self.mailbox.name

    # --- used by the running instance -------------------------------------------------

    @property
    def forking(self) -> bool:
        """Whether the next turn forks `fork_source` rather than resuming a session."""
        return self.session_id is None and self.fork_source is not None

    @property
    def resumed_session(self) -> str | None:
        """The session the next turn resumes (or forks)."""
        return self.fork_source if self.forking else self.session_id

    def begin(self, request: Request) -> None:
        self.current = request
        self._current_since = trio.current_time()

    def next(self) -> Request | None:
        """The request to run next, left where it is until the agent may run it (`take`):
        the one handed over (current), else the mailbox's head; None while halted or
        without work."""
        if self.current is not None:
            return self.current
        return None if self.halted else self.mailbox.head()

    def take(self) -> Request | None:
        """The next request to run, now current; None while halted or without work."""
        if self.halted:
            return None
        request = self.mailbox.take()
        if request is not None:
            self.begin(request)
        return request

    async def defer(self, request: Request) -> None:
        """``request`` (handed over, or the head just read) cannot run at once after all:
        it waits at the head of the queue; one started in the store as it was handed over
        waits there unstarted, so a program that closes meanwhile leaves it queued for the
        next owner (not ended `OwnerDied`, for a turn that never began)."""
        if request is self.current:
            self.current = None
            self.mailbox.put_back(request)
        if request.claimed and self.requests is not None:
            await self.requests.release(request)

    def park(self) -> Awaitable[object]:
        """Await it to wait until other tasks give the instance something to do.

        Cancellation: safe; the instance is no longer parked."""
        self._parked = trio.lowlevel.current_task()
        # What an idle agent holds while it waits, so no coroutine of its own, and a bound
        # method rather than a closure.
        return trio.lowlevel.wait_task_rescheduled(self._unpark)  # noqa: ASYNC105 (the caller awaits it)

    def _unpark(self, _: Any) -> trio.lowlevel.Abort:
        self._parked = None
        return trio.lowlevel.Abort.SUCCEEDED

    def _wake(self) -> None:
        task = self._parked
        if task is not None:
            self._parked = None
            trio.lowlevel.reschedule(task)

    def turn_ended(self) -> None:
        self.turn = None
        if self._turn_over is not None:
            self._turn_over.set()
            self._turn_over = None

    def instance_ended(self, handle: AgentHandle) -> None:
        """The instance of ``handle`` has ended; a halt it deferred holds for the next."""
        self.halted = self.halted or self.halt_pending
        self.halt_pending = False
        if self.handle is handle:
            self.handle = None

    async def claim(self) -> None:
        """Make the store's row this agent's: its backend, session, cwd and state. Marked
        claimed only once both are written: a claim that failed is made again by the next
        write that needs the row (the turn's checkpoint, its record, the next turn's start).

        Raises what the store raises (`StoreError`)."""
        await self.store.checkpoint_session(
            self.name, backend=self.backend, session_id=self.session_id, cwd=self.cwd
        )
        await self.store.save_state(self.name, self.state_blob)
        self.unclaimed = False

    async def forget_session(self) -> None:
        """The next turn starts a new session; the store's row forgets the old one."""
        self.session_id = None
        self.session_totals = NO_TOTALS
        if self.unclaimed:
            return  # the row is not this agent's yet
        await self.store.checkpoint_session(
            self.name, backend=self.backend, session_id=None, cwd=self.cwd
        )

    # --- called by the runtime (other tasks) ------------------------------------------

    def submit(self, prompt: str, origin: Origin) -> Request:
        """Hand the agent a prompt: it starts at once if the agent is idle, else queues.

        Raises `MailboxFull` if the queue is full by count or bytes."""
        check_prompt(prompt)
        request = self.mailbox.request(prompt, origin)
        self.enter(request)
        return request

    def own_turn(self) -> None:
        """The agent's warm CLI started a turn by itself: the agent runs it next (its
        instance's `CliLifecycle` calls this)."""
        self.mailbox.own_turn()
        if self.current is None:
            self._wake()

    @property
    def waiting(self) -> bool:
        """Whether a request entered now starts at once: the instance waits for work, and
        no usage limit parks its credential (a request then waits, unstarted, in the
        store's queue, where a program that ends meanwhile leaves it for the next)."""
        if self._parked is None or self.halted or self.admitting:
            return False
        return self.credential is None or not self.credential.parked()

    def enter(self, request: Request, *, bounded: bool = True) -> None:
        """Hand the agent ``request`` (as `submit`); not ``bounded``: a store that keeps
        requests has checked the mailbox's bounds as it accepted it."""
        if self.waiting:
            self.mailbox.track(request)
            self.begin(request)
            self._wake()
            return
        idle = self.current is None and not self.halted
        # An ask or a tell: a fire of a schedule (or a wake-up) queues, under its overlap rule.
        interrupt = (
            self.when_busy == "interrupt"
            and self.current is not None
            and request.origin in ("ask", "tell")
        )
        self.mailbox.admit(request, idle=idle, bounded=bounded, first=interrupt)
        if interrupt:
            self.interrupt()
        elif self._parked is not None and not self.halted:
            # Waiting for work while its credential is parked: the request waits, queued and
            # untaken, and the instance waits for the reset.
            self._wake()

    async def arriving(self, prompt: str) -> Request | None:
        """What ``when_busy`` makes of ``prompt``, arriving now: the running request it
        joined (``steer``), or None for a prompt to submit (`enter` queues it, first with
        ``interrupt``). Raises `AgentBusy` (``reject``), and what a steer raises but
        `NoTurnRunning` (no turn on the CLI to join: the prompt queues)."""
        current = self.current
        if current is None or self.when_busy in ("enqueue", "interrupt"):
            await trio.lowlevel.checkpoint()
            return None
        check_prompt(prompt)
        if self.when_busy == "reject":
            await trio.lowlevel.checkpoint()
            raise AgentBusy(self.name, "processing")
        try:
            await self.steer(prompt)
        except NoTurnRunning:
            return None
        return current

    def abandon(self, request: Request) -> trio.Event | None:
        """The asker was cancelled: a queued request leaves the queue and never runs; a
        running one's turn is stopped (``cancelled``). Returns what is set once that turn's
        processes are gone, or None when no turn runs."""
        if request.settled:
            return None
        if self.mailbox.remove(request):
            self.mailbox.settle_withdrawn(request, self.session_id)
            return None
        request.abandoned = True
        turn = self.turn
        if request is not self.current or turn is None:
            return None
        turn.stop(StopReason.CANCELLED, ASK_CANCELLED)
        if self._turn_over is None:
            self._turn_over = trio.Event()
        return self._turn_over

    def withdraw(self, ref: Ref) -> bool:
        """Settle the queued (or chained) request ``ref`` as `Withdrawn`; False if it is
        running, settled or unknown."""
        return self.mailbox.withdraw(ref, self.session_id)

    def notify(self, event: Any) -> None:
        self.mailbox.notify(event)
        if self.current is None:
            self._wake()

    def interrupt(self) -> bool:
        turn = self.turn
        if turn is None:
            return False
        turn.stop(StopReason.INTERRUPTED, "interrupted")
        return True

    def interrupt_request(self, ref: Ref) -> bool:
        current = self.current
        if current is None or current.ref != ref:
            return False
        return self.interrupt()

    def halt(self) -> None:
        self.halt_reason = None
        if self.current is not None:
            self.halt_pending = True
        else:
            self.halt_now()

    def halt_now(self) -> None:
        """Halted: no new turn, and the warm CLI's background work ends with it."""
        self.halted = True
        if self.channel is not None:
            self.channel.end_background("the agent halted")

    def unhalt(self) -> None:
        self.halted = self.halt_pending = False
        self.halt_reason = None
        self._wake()

    def hold(self, reason: str) -> None:
        """The runtime halts the agent (its credential's group), saying why. An agent halted
        already for no reason of the runtime's (`halt`, a handler's `Halt`, a spent budget)
        stays halted so: only `unhalt` ends that, not the credential's `release`."""
        if (self.halted or self.halt_pending) and self.halt_reason is None:
            return
        self.halt()
        self.halt_reason = reason

    def release(self, reason: str) -> None:
        """Unhalt the agent if the runtime halted it for ``reason`` (not a `halt` since)."""
        if self.halt_reason is not None and self.halt_reason.startswith(reason):
            self.unhalt()

    async def reset_session(self) -> None:
        # A checkpoint on every path: the store's write may wait for nothing.
        await trio.lowlevel.checkpoint()
        if self.current is not None:
            raise AgentBusy(self.name, "processing")
        await self.forget_session()

    async def channel_call(self, call: ChannelCall, argument: Any) -> Any:
        """The runtime's ``call`` to the agent's warm CLI (`CliLifecycle.call`); refused
        with `InvalidOptions` for an agent that has none."""
        mode = self.mode
        if not mode.warm or call not in mode.calls:
            why = (
                f"agent {self.name!r} runs {mode.name} turns, without a warm CLI to ask; "
                "start it with keep_alive=SECONDS"
                if not mode.warm
                else f"the {self.backend!r} backend's live CLI takes no {call} request"
            )
            # A steered message is the user's text, like a prompt: not repeated in errors.
            shown = f"a message of {len(argument)} characters" if call == "steer" else argument
            raise InvalidOptions(call, shown, why)
        channel = self.channel
        if channel is None:  # its instance starts (or restarts): as with no live CLI
            await trio.lowlevel.checkpoint()
            if call == "steer":
                raise NoTurnRunning(self.name, call)
            if call in SETTINGS:
                self.channel_settings()[call] = argument
            return None
        return await channel.call(call, argument)

    async def steer(self, text: str) -> None:
        """Add ``text`` to the running turn on the agent's warm CLI (see `Runtime.steer`)."""
        check_prompt(text, "text")
        await self.channel_call("steer", text)

    def channel_settings(self) -> dict[ChannelCall, Any]:
        """The settings changed in band, which hold for the agent's later live processes
        (shared with its live CLI's lifecycle, which changes them too)."""
        if self._channel_settings is None:
            self._channel_settings = {}
        return self._channel_settings

    def status(self) -> AgentStatus:
        current = self.current
        info: CurrentRequest | None = None
        state: AgentState
        if self.handle is None:
            state = "restarting"
        elif current is not None:
            turn = self.turn
            info = CurrentRequest(
                ref=current.ref,
                origin=current.origin,
                elapsed=trio.current_time() - self._current_since,
                waiting_for_process=turn is not None and turn.waiting_for_process,
            )
            state = "processing"
        elif self.halted:
            state = "halted"
        elif self.credential is not None and self.credential.parks_agent(self.name):
            state = "parked"
        else:
            # Between turns only a warm CLI (keep_alive) lives on.
            state = "idle" if self.cli_pid is None else "idle_warm"
        mailbox = self.mailbox
        notifications = mailbox.notifications
        queue = mailbox.queue
        return AgentStatus(
            name=self.name,
            state=state,
            mode=self.mode.name,
            halt_pending=self.halt_pending,
            queued=mailbox.queued,
            queued_bytes=mailbox.queued_bytes,
            chained=mailbox.chained_count,
            pending_notifications=len(notifications) if notifications else 0,
            current=info,
            turns=self.turns,
            session_id=self.session_id,
            restarts=self.restarts,
            cli_pid=self.cli_pid,
            background=() if self.channel is None else self.channel.background,
            **self._spending(),
            cli_version=self.cli_version,
            oldest_queued=trio.current_time() - queue[0].accepted_at if queue else None,
            queued_keys=tuple(r.key for r in queue if r.key is not None) if queue else (),
            **self._credential_status(),
        )

    def _credential_status(self) -> dict[str, Any]:
        group = self.credential
        if group is None:
            return {"halt_reason": self.halt_reason}
        return {
            "credential": group.label,
            "parked_until": group.parked_until if group.parks_agent(self.name) else None,
            "halt_reason": self.halt_reason,
        }

    def _spending(self) -> dict[str, Any]:
        return {
            "spent_usd": self.spent_usd,
            "spent_tokens": self.spent_tokens,
            "budget_left_usd": self.budgets.left_usd(),
            "budget_left_tokens": self.budgets.left_tokens(),
        }

"""The agent operations as `Runtime` methods (`AgentCalls`): each checks its arguments, names
the agent's address (`agentrt._address`) and calls it, the same way whether this runtime
runs the agent or another one owns it; and the owner's side of a call another runtime
routed here (`AgentCalls._serve_routed`).

Each is marked `operation`, by which the asyncio and sync forms, made from these methods in
a loop, type-check as their own (`agentrt._operations` says what a new operation touches).
``stream`` is not here: its form differs per face (each face's stream of events), so each
face writes it out.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from . import _scheduling as scheduling
from ._address import ROUTED, LocalAgent, RemoteAgent, resolve
from ._arguments import check_name, check_ref, wrong_type
from ._channel import ContextUsage
from ._durable import check_key, find_by_key, poll_result, refuse_key, settled, wait_stored
from ._errors import (
    AgentNotFound,
    AgentRTError,
    AgentStopped,
    InvalidOptions,
    NoRuntime,
    RoutingError,
)
from ._events import Response
from ._operations import operation
from ._requests import Completed, Failed, NotFound, PollResult, Ref, Withdrawn
from ._schedule import Schedule
from ._scheduler import Scheduler
from ._status import AgentStatus
from ._stores._protocols import Router, SessionStore
from ._stores._request_store import RequestStore
from ._supervisor import Context

# What a routed wait or poll raises where no owner answers for the ref (none runs the agent,
# or its owner died or lost the lease meanwhile): the store that keeps requests is read.
_UNREACHED = (AgentNotFound, AgentStopped, RoutingError)


class AgentCalls:
    """The `Runtime`'s calls on one agent (a base of `Runtime`, documented with it)."""

    __slots__ = ()

    # The runtime's, set by `Runtime.__init__`.
    _context: Context
    # On a store with routing (a `RoutingStore`): reaches the agents other runtimes own.
    _router: Router | None
    # On a store that keeps schedules (a `ScheduleStore`): fires this runtime's agents'.
    _scheduler: Scheduler | None

    def _resolve(self, name: str) -> LocalAgent | RemoteAgent:
        if self._context.closed:
            raise NoRuntime("this runtime is closed")
        requests = self._context.capabilities.requests
        return resolve(self._context.children, self._router, name, requests)

    def _serve_routed(self, call: str, name: str, arguments: tuple[Any, ...]) -> object:
        """Run a call another runtime routed here, for an agent of this runtime only (so a
        routed call is never routed on); returns its awaitable, which for an agent this
        runtime is starting waits for the start to end. A runtime that is closing answers
        as its agents do then: stopped (`NoRuntime` is the caller's own runtime's; a caller
        whose ref was stored reads it from the store then)."""
        if self._context.closed:
            raise AgentStopped(name, "its runtime closed")
        method = ROUTED.get(call)
        if method is None:
            raise AgentRTError(f"a routed call to {call!r}: not a call agentrt routes")
        child = self._context.children.get(name)
        if child is not None:
            return method(child.address(), *arguments)
        start = self._context.starting.get(name)
        if start is None:
            raise AgentNotFound(name)
        # The name's lease, which routed the call here, is taken early in its start.
        return self._serve_once_started(start, method, name, arguments)

    async def _serve_once_started(
        self,
        start: trio.Event,
        method: Callable[..., Awaitable[object]],
        name: str,
        arguments: tuple[Any, ...],
    ) -> object:
        await start.wait()
        child = self._context.children.get(name)
        if child is None:
            raise AgentNotFound(name)
        return await method(child.address(), *arguments)

    def _store_here(self, name: str) -> SessionStore:
        """The store, for a call on agent ``name``'s records that this runtime makes on it,
        whoever owns the agent (a schedule names an agent that may run nowhere yet)."""
        check_name(name)
        if self._context.closed:
            raise NoRuntime("this runtime is closed")
        return self._context.store

    def _poke_scheduler(self) -> None:
        if self._scheduler is not None:
            self._scheduler.poke()

    def _stored(self, ref: Ref) -> RequestStore | None:
        """The store's requests, where ``ref``'s agent is not this runtime's (another
        program owns it, or none does now) on a store that keeps them: a ref the owner
        does not answer for (or no owner is reachable) is read from the store."""
        requests = self._context.capabilities.requests
        if requests is None or ref.name in self._context.children:
            return None
        if self._context.closed:
            raise NoRuntime("this runtime is closed")
        return requests

    @operation
    async def ask(self, name: str, prompt: str, key: str | None = None) -> Response:
        """Send ``prompt`` to agent ``name`` and wait for the turn's `Response`.

        Asks to a busy (or restarting) agent queue in FIFO order. Raises `TurnFailed` (with
        its `StopReason`) when the turn fails, `MailboxFull` when the queue is full (by count
        or bytes), `AgentStopped` when the agent stops (or crashes) before answering,
        `AgentNotFound`.

        Cancellation: cancelling the caller (``trio.fail_after``, ``move_on_after``, a
        cancelled nursery) cancels the request. Queued, it leaves the queue and never
        runs. Running, its turn is stopped as ``interrupt`` stops it, with stop reason
        ``cancelled`` (the session id is kept; ``handle_error`` sees the `TurnFailed`), and
        the cancellation reaches the caller once the turn's processes are gone: that wait
        is shielded and bounded (twice ``kill_grace`` plus 10 s).

        On a `PostgresStore`, an agent another runtime owns is asked there (see
        docs/deployment.md, "Calls to agents other runtimes own"); cancelling such an ask
        cancels it there.

        On a store that keeps requests (`SQLiteStore`, `PostgresStore`) the request is
        stored before the ask waits, and outlives this program (see `tell`); ``key`` is
        its idempotency key, as for `tell`: an ask with a key the store keeps a request
        under already waits for that request's answer. A request whose runtime died while
        its turn ran raises `OwnerDied` (``on_owner_death``).
        """
        return await self._resolve(name).ask(prompt, key)

    @operation
    async def tell(self, name: str, prompt: str, key: str | None = None) -> Ref:
        """Queue ``prompt`` for agent ``name`` and return its `Ref`, without waiting for the
        turn; collect the result with `poll` or `wait`. Raises `MailboxFull` when the queue
        is full, `AgentNotFound`. For an agent another runtime owns, the `Ref` is that
        runtime's, and `wait` and `poll` reach it there.

        On a store that keeps requests (`SQLiteStore`, `PostgresStore`) the request is
        stored before `tell` returns: it runs once, in order, even if this program dies
        (the next owner of ``name`` runs it), and its outcome is kept for the agent's
        ``result_ttl``, for `wait` and `poll` from any program on the store.
        ``key`` (a non-empty str of at most 1024 UTF-8 bytes, no NUL; else
        `InvalidOptions`) is an idempotency key: while the store keeps a request
        of ``name`` under it, a tell with it stores and starts nothing and returns that
        request's `Ref` (`request` finds it by key). A key on `MemoryStore` raises
        `InvalidOptions`.

        Cancellation: a tell cancelled before it returns queues nothing. On a store that
        keeps requests the write is shielded: once begun, the request is stored and the
        tell returns it; the cancellation is seen after."""
        return await self._resolve(name).tell(prompt, key)

    @operation
    async def request(self, name: str, key: str) -> Ref | None:
        """The `Ref` of agent ``name``'s request kept under the idempotency key ``key``
        (queued, running, or settled within its ``result_ttl``), read from the store; None
        if it keeps none. With it a caller re-attaches to its work after its own restart,
        or from another program on the store: `wait` and `poll` reach the request where
        it is (its owner here, or the store, read at a bounded interval). Raises
        `InvalidOptions` on a store that keeps no requests (`MemoryStore`), or for a key
        that is not a non-empty str.

        Cancellation: safe; reading changes nothing."""
        check_key(key)
        requests = self._context.capabilities.requests
        if requests is None:
            refuse_key(key)
        if self._context.closed:
            raise NoRuntime("this runtime is closed")
        return await find_by_key(requests, name, key)

    @operation
    async def poll(self, ref: Ref) -> PollResult:
        """`Pending`, `Completed`, `Failed` or `Withdrawn` for a tell (of the agent the ref
        names); `NotFound` for an unknown ref or one whose result was evicted (oldest first,
        beyond ``max_results`` or ``max_result_bytes``). Raises `AgentNotFound`.

        On a store that keeps requests a ref the runtime no longer holds in memory (an
        earlier program's, or one of an agent another program owns) is read from the
        store: its outcome is kept for ``result_ttl``.

        Cancellation: safe; polling changes nothing."""
        requests = self._stored(check_ref(ref))
        if requests is None:
            return await self._resolve(ref.name).poll(ref)
        if self._router is not None:
            try:
                result = await self._resolve(ref.name).poll(ref)
            except _UNREACHED:
                result = NotFound()
            if not isinstance(result, NotFound):
                return result
        return poll_result(await requests.find_request(ref.name, id=str(ref.id)))

    @operation
    async def wait(self, ref: Ref) -> Completed | Failed | Withdrawn | NotFound:
        """Wait for the tell ``ref`` to settle; returns what `poll` then returns
        (`Completed`, `Failed` or `Withdrawn`; `NotFound` for an unknown or evicted ref).
        Raises `AgentNotFound` when no agent of that name runs.

        Cancellation: only the wait is cancelled; the tell goes on (it is fire-and-forget:
        withdraw it while queued with `withdraw`, or stop it with `interrupt_request`).

        On a store that keeps requests a ref this runtime does not run (an earlier
        program's, or one of an agent another program owns, with no routing between
        them) is waited for in the store, read at most every second."""
        requests = self._stored(check_ref(ref))
        if requests is None:
            return await self._resolve(ref.name).wait(ref)
        if self._router is not None:
            try:
                result = await self._resolve(ref.name).wait(ref)
            except _UNREACHED:
                result = NotFound()
            if not isinstance(result, NotFound):
                return result
        return settled(await wait_stored(requests, ref.name, str(ref.id)))

    @operation
    async def notify(self, name: str, event: Any) -> None:
        """Deliver ``event`` to the agent's ``handle_event``; while a turn runs (or the
        agent restarts) it waits. Raises `MailboxFull` beyond ``max_pending`` waiting
        notifications, `AgentNotFound`. To an agent another runtime owns the event travels
        as data: None, bool, int, float, str, bytes, and lists and str-keyed dicts of those
        (anything else raises `TypeError` naming it).

        Cancellation: a notify cancelled before it returns delivers nothing."""
        await self._resolve(name).notify(event)

    @operation
    async def interrupt(self, name: str) -> bool:
        """End the agent's running turn (its caller gets `TurnFailed` with
        ``interrupted``); False if no turn was running. Raises `AgentNotFound`.

        Cancellation: an interrupt cancelled before it returns was not sent. One that
        returned has been sent; the turn ends with its process tree, as for any stop."""
        return await self._resolve(name).interrupt()

    @operation
    async def interrupt_request(self, ref: Ref) -> bool:
        """Like `interrupt` on the agent ``ref`` names, only if ``ref`` is the request being
        processed now. Raises `AgentNotFound` when no agent of that name runs.

        Cancellation: as for `interrupt`."""
        return await self._resolve(check_ref(ref).name).interrupt_request(ref)

    @operation
    async def withdraw(self, ref: Ref) -> bool:
        """Take a queued tell out of its agent's queue (it polls as `Withdrawn`); False if
        it is running, finished or unknown. Raises `AgentNotFound` when no agent of that name
        runs.

        Cancellation: a withdraw cancelled before it returns took nothing back."""
        return await self._resolve(check_ref(ref).name).withdraw(ref)

    @operation
    async def halt(self, name: str) -> None:
        """Stop the agent taking turns (after the running one) until `unhalt`; queued
        work waits and new work is still accepted. A restarted agent stays halted. Raises
        `AgentNotFound`.

        Cancellation: a halt cancelled before it returns did not halt the agent."""
        await self._resolve(name).halt()

    @operation
    async def unhalt(self, name: str) -> None:
        """Undo `halt` (or a handler's `Halt`): the agent takes its queued work again.
        Raises `AgentNotFound`.

        Cancellation: an unhalt cancelled before it returns left the agent halted."""
        await self._resolve(name).unhalt()

    @operation
    async def reset_session(self, name: str) -> None:
        """Forget the agent's conversation: its next turn starts a new session. Only while
        no request is being processed; raises `AgentBusy` otherwise, `StoreError` when the
        store cannot forget it, `AgentNotFound`.

        Cancellation: safe; the stored session may or may not be forgotten yet."""
        await self._resolve(name).reset_session()

    @operation
    async def status(self, name: str) -> AgentStatus:
        """A content-free snapshot of the agent: state, queue, current request, turns,
        restarts (for an agent another runtime owns, the one its owner takes). Raises
        `AgentNotFound`.

        Cancellation: safe; reading the status changes nothing."""
        return await self._resolve(name).status()

    @operation
    async def set_model(self, name: str, model: str | None) -> None:
        """Switch the model of the agent's warm CLI (``keep_alive``) in band, for its next
        turns (None: the CLI's default); a running turn goes on with the new model from its
        next model call. The change holds for the agent's later CLI processes too (a
        hibernated one resumes with it, a restart keeps it) until it stops; `start_agent`
        begins again from its options. Raises `InvalidOptions` when the agent has no warm
        CLI (one-shot and in-process agents, or a backend that cannot) or the CLI refuses
        the model, `ChannelError` when the CLI gives no answer.

        Cancellation: a call cancelled while it waits for the CLI's answer may have reached
        the CLI (its running process may have switched), but the change is not kept for the
        agent's later processes: call it again."""
        if model is not None and not isinstance(model, str):
            raise wrong_type("model", "a str or None", model)
        await self._resolve(name).set_model(model)

    @operation
    async def set_permission_mode(self, name: str, mode: str) -> None:
        """Switch the permission mode of the agent's warm CLI in band (Claude Code's
        ``default``, ``acceptEdits``, ``plan``, ``bypassPermissions``, ``dontAsk``, ...);
        held as `set_model` holds, and it raises what `set_model` raises.

        Cancellation: as for `set_model`."""
        if not isinstance(mode, str):
            raise wrong_type("mode", "a str", mode)
        await self._resolve(name).set_permission_mode(mode)

    @operation
    async def context_usage(self, name: str) -> ContextUsage | None:
        """How full the agent's context window is, as its warm CLI counts it; None while it
        has no live CLI (it hibernated, or has run no turn yet). Raises as `set_model`.

        Cancellation: safe; reading the usage changes nothing."""
        return await self._resolve(name).context_usage()

    @operation
    async def stop_task(self, name: str, task_id: str) -> None:
        """Stop the background task ``task_id`` (a Bash command or a subagent run in the
        background, as the turn's ``task_started`` frames name it) of the agent's warm CLI;
        nothing when it has no live CLI. Raises as `set_model`, and `InvalidOptions` for an
        empty ``task_id``.

        Cancellation: a stop cancelled while it waits for the CLI's answer may have reached
        the CLI; the task may or may not have stopped."""
        if not isinstance(task_id, str) or not task_id:
            raise InvalidOptions("task_id", task_id, "a task id is a non-empty str")
        await self._resolve(name).stop_task(task_id)

    @operation
    async def steer(self, name: str, text: str) -> None:
        """Add ``text`` to the turn agent ``name`` is running, as a message from the user
        that the model reads within that turn (Claude Code hands it over with the next tool
        result; one that comes after the turn's last model call runs right after it, still
        in the same turn; codex's app-server, with the model's next call). The running
        request's `Response` then answers both. Returns once the CLI has taken the message.

        Only a warm agent (``keep_alive``) on a CLI that takes messages mid-turn can be
        steered (Claude Code, codex, pi): raises `InvalidOptions` otherwise (one process per
        turn, the in-process backend, Gemini CLI, Qwen Code); `NoTurnRunning` when no turn
        runs on its CLI now (the agent is idle, its turn is starting or has ended): send it
        with `ask` or `tell` then, or start the agent with ``when_busy="steer"``, which
        does that for you. ``text`` empty or blank is a `ValueError`; a CLI that does not
        acknowledge the message raises `ChannelError` (and is ended).

        Cancellation: a steer cancelled while it waits for the CLI's acknowledgement may
        have reached the CLI."""
        await self._resolve(name).steer(text)

    @operation
    async def stop_agent(self, name: str) -> None:
        """Stop agent ``name`` for good (its supervisor does not restart it): its running
        turn is cancelled, its active and queued asks get `AgentStopped`, then
        ``terminate_agent`` runs. Returns once it has ended and its lease is given back
        (another runtime may start ``name`` then). Its failover spec is removed from the
        store first, so no runtime hosting agents takes it over. Raises `AgentNotFound`.

        Cancellation: the agent still stops; only the wait for it is cut short."""
        await self._resolve(name).stop_agent()

    @operation
    async def schedule(
        self,
        name: str,
        prompt: str,
        *,
        every: float | None = None,
        cron: str | None = None,
        overlap: str = "skip",
        key: str | None = None,
    ) -> Schedule:
        """Have agent ``name`` run ``prompt`` on a schedule: every ``every`` seconds (the
        first fire one period from now), or at the times the cron expression ``cron``
        names (five fields, or six with seconds first, read in UTC); give one of the two.
        Returns the `Schedule` as the store keeps it (its ``id`` names it to `unschedule`
        and `run_schedule`).

        Each fire is a request of origin ``schedule``: it queues in the agent's mailbox as a
        tell does, runs through its callbacks, and its `Response.origin` is
        ``"schedule"``. ``overlap`` says what a fire does while the previous fire's request
        is queued or running: ``"skip"`` (the default) drops it, ``"queue"`` queues it
        behind. The schedule is stored: on a store several programs share (`SQLiteStore`,
        `PostgresStore`) whichever program owns the agent fires it, each due time once
        (its request stored under a key of the schedule and the due time), also after a
        restart; fires missed while no program ran the agent are not made up, one fire
        stands for them. ``key`` is an idempotency key: while a schedule of ``name`` has
        it, a schedule call with it keeps nothing new and returns that one. The agent need
        not run: its schedules fire once a runtime on the store runs it.

        Raises `InvalidOptions` for neither or both of ``every`` and ``cron``, a period that
        is not a number > 0, a malformed cron expression, an ``overlap`` that is not
        ``"skip"`` or ``"queue"``, or a store without schedules
        (`agentrt.store.ScheduleStore`); `StoreError` when the store fails.

        Cancellation: safe before the store's write; once begun the write may have been
        made."""
        kept = await scheduling.add(self._store_here(name), name, prompt, every, cron, overlap, key)
        self._poke_scheduler()
        return kept

    @operation
    async def schedules(self, name: str) -> Sequence[Schedule]:
        """Agent ``name``'s schedules, oldest first, as the store keeps them: each with its
        next due time and its last run (``last_run``, and the `Ref` of that fire's request,
        ``last_ref``, for `poll` and `wait`). Empty on a store that keeps no schedules.
        Raises `StoreError` when the store fails.

        Cancellation: safe; reading changes nothing."""
        return await scheduling.of(self._store_here(name), name)

    @operation
    async def unschedule(self, name: str, schedule_id: str) -> bool:
        """Remove agent ``name``'s schedule ``schedule_id`` (a `Schedule`'s ``id``); False if
        it has none of that id. A fire already made runs on. Raises `InvalidOptions` on a
        store without schedules, `StoreError` when the store fails.

        Cancellation: safe before the store's write; once begun the write may have been
        made."""
        return await scheduling.drop(self._store_here(name), name, schedule_id)

    @operation
    async def run_schedule(self, name: str, schedule_id: str) -> bool:
        """Fire agent ``name``'s schedule ``schedule_id`` now, as if it were due: the
        agent's owner fires it at once (this runtime's agent) or at its next read of the
        store (another program's, within a second), under its overlap rule; its request is
        the schedule's ``last_ref`` then, and its next fire one period (or cron's next time)
        later. False if the agent has no schedule of that id. Raises `InvalidOptions` on a
        store without schedules, `StoreError` when the store fails.

        Cancellation: safe before the store's write; once begun the write may have been
        made."""
        made = await scheduling.due_now(self._store_here(name), name, schedule_id)
        self._poke_scheduler()
        return made

"""Location transparency on a `PostgresStore`: a call for an agent that another runtime owns
goes to that runtime through the database, and its answer comes back the same way.

The transport is the store's database, not a protocol of ours. A call is a row of the table
``routed`` addressed to the owner's runtime id (read from the name's lease), inserted
with a ``NOTIFY`` on the owner's channel; the owner takes its rows with ``FOR UPDATE SKIP
LOCKED``, runs each call as a local one, writes the answer into the row and notifies the
caller's channel, and the caller reads the answer and deletes the row. Each runtime
``LISTEN``s on one channel of its own (both roles) on a connection of its own, waited on
by trio (no thread), and runs its routed queries on a second connection.

Nothing hangs on a dead owner: while it waits the caller checks, every `CHECK_EVERY`
seconds, that the owner still holds the name's lease with the same epoch (on the same
node, that its process lives too) and otherwise raises `AgentStopped` naming it. A lost
notification (a listener that reconnected) costs at most that long as well. Nor on a live
owner whose connection broke under an answer: it writes the answer again every
`CHECK_EVERY`, on a new connection, until it is written. Nor on a claim whose rows were
marked taken but never came back (its connection broke after the commit): every
`SWEEP_EVERY` the owner puts back its own taken, unanswered rows that none of its tasks
holds, and takes them again; a row it holds is never put back, so no call runs twice.
"""

from __future__ import annotations

import hashlib
import logging
import secrets
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import attrs
import trio

from .._errors import AgentNotFound, AgentRTError, RoutingError, StoreError
from .._records import LeaseOwner
from .._redact import redact
from ._protocols import Serve
from ._route_codec import decode_answer, decode_call, encode_call
from ._route_serving import finish_call, owner_stopped, start_call
from ._route_values import RowRefused, shown

if TYPE_CHECKING:
    import psycopg

_T = TypeVar("_T")

logger = logging.getLogger("agentrt")

# How often a waiting caller looks at the owner's lease (and for an answer whose
# notification it missed); an owner that died is found within its lease_ttl plus this.
CHECK_EVERY = 1.0
# How often an owner looks for calls whose notification it missed, or whose claim it lost.
SWEEP_EVERY = 5.0
# An answer not read for this long (seconds) has lost its caller.
PRUNE_AFTER = 600
# Rows one claim takes; more are claimed at once after.
_CLAIM_BATCH = 100
# A caller that was cancelled tells the owner so, within this bound.
_CANCEL_GRACE = 5.0

# The owner's lease of a name, live on the database's clock.
_OWNER = """
SELECT epoch, node, pid, start_time, runtime_id FROM leases
WHERE name = %s AND runtime_id IS NOT NULL AND expires_at > clock_timestamp()
"""

_SEND = """
INSERT INTO routed (id, target, caller, name, call, arguments) VALUES (%s, %s, %s, %s, %s, %s)
"""

_CLAIM = f"""
UPDATE routed SET taken = true
WHERE id IN (
    SELECT id FROM routed WHERE target = %s AND NOT taken
    ORDER BY seq LIMIT {_CLAIM_BATCH} FOR UPDATE SKIP LOCKED
)
RETURNING seq, id, caller, name, call, arguments
"""

# Rows this runtime marked taken but holds no more (a claim that committed but never came
# back): put back in the queue. An answered row is its caller's to read.
_UNCLAIM = """
UPDATE routed SET taken = false
WHERE target = %s AND taken AND answer IS NULL AND NOT (id = ANY(%s))
"""
_ANSWER = "UPDATE routed SET answer = %s, answered_at = clock_timestamp() WHERE id = %s"
# Answers whose caller died before it read them (a caller reads within CHECK_EVERY).
_PRUNE = f"""
DELETE FROM routed
WHERE target = %s AND answered_at < clock_timestamp() - make_interval(secs => {PRUNE_AFTER})
"""
# Read, then deleted: an answer read is not lost to a connection that breaks under its delete.
_COLLECT = "SELECT answer FROM routed WHERE id = %s AND answer IS NOT NULL"
_DROP = "DELETE FROM routed WHERE id = %s"
_NOTIFY = "SELECT pg_notify(%s, %s)"


class Database(AbstractAsyncContextManager[Any], Protocol):
    """What the router uses of a `PostgresStore` (one of its own, not opened yet): its
    reconnecting calls, a connection of its own to listen on, and its name in errors."""

    @property
    def where(self) -> str: ...

    def connect(self) -> psycopg.Connection[Any]: ...

    async def call(self, work: Callable[[psycopg.Connection[Any]], _T]) -> _T: ...


def channel(runtime_id: str) -> str:
    """The ``LISTEN`` channel of a runtime: its id hashed, as an identifier fits 63 bytes."""
    return "agentrt_" + hashlib.blake2b(runtime_id.encode(), digest_size=8).hexdigest()


@attrs.frozen
class _Owner:
    epoch: int
    owner: LeaseOwner


@attrs.define(eq=False)
class PostgresRouter:
    """Sends calls for names this runtime does not own, and serves the calls sent to it:
    the `agentrt.store.Router` of a `PostgresStore`. ``database()`` makes an unopened
    store on the same database, with the store's settings; ``ended(owner)`` says whether
    the runtime ``owner`` has certainly ended (one of this node whose process is gone: the
    runtime's lease holders answer it), so that a caller stops waiting on it."""

    database: Callable[[], Database]
    me: LeaseOwner
    ended: Callable[[LeaseOwner], bool]
    # Answers awaited by this runtime's callers, by call id.
    _answers: dict[str, trio.Event] = attrs.field(factory=dict, init=False)
    # Calls this runtime is serving, by id: a caller's cancel cancels its scope.
    _serving: dict[str, trio.CancelScope] = attrs.field(factory=dict, init=False)
    # Rows this runtime claimed and has not finished with (answered, dropped, or withdrawn
    # by their caller): the sweep never puts one back, so none runs twice.
    _held: set[str] = attrs.field(factory=set, init=False)
    _work: trio.Event = attrs.field(factory=trio.Event, init=False)
    _db: Database = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        # Routed queries have a connection of their own: none waits behind a checkpoint.
        self._db = self.database()

    async def run(
        self, serve: Serve, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Listen and serve until cancelled; start it with ``nursery.start`` (it has started
        once it listens)."""
        async with self._db, trio.open_nursery() as nursery:
            await nursery.start(self._listen_forever)
            nursery.start_soon(self._serve_forever, serve, nursery)
            task_status.started()

    # --- the caller's side ---

    async def call(self, name: str, call: str, arguments: tuple[Any, ...]) -> Any:
        """Run ``call`` on the runtime that owns ``name``, and return what it returned (or
        raise what it raised). `AgentNotFound` when no live runtime owns ``name``;
        `AgentStopped` when its owner dies (or gives up the name) before answering."""
        try:
            row = encode_call(call, arguments)
        except RowRefused as exc:
            raise RoutingError(name, call, str(exc)) from None
        ident = secrets.token_hex(12)
        arrived = self._answers[ident] = trio.Event()
        try:
            owner = await self._db.call(lambda conn: self._send(conn, ident, name, call, row))
            # A tell, once sent, is seen through (its owner stores it whatever the caller
            # does): it returns its Ref, and a cancellation is seen after, as a local one's.
            with trio.CancelScope(shield=call == "tell"):
                return await self._await_answer(ident, arrived, name, call, owner)
        except BaseException:
            await self._withdraw(ident, name)
            raise
        finally:
            del self._answers[ident]

    def _send(
        self,
        conn: psycopg.Connection[Any],
        ident: str,
        name: str,
        call: str,
        arguments: bytes,
    ) -> _Owner:
        with conn.transaction():
            found = _owner_of(conn, name)
            if found is None or found.owner.runtime_id == self.me.runtime_id:
                # No live owner; or this runtime's own lease, of an agent starting or ending.
                raise AgentNotFound(name)
            target = found.owner.runtime_id
            row = (ident, target, self.me.runtime_id, name, call, arguments)
            conn.execute(_SEND, row)
            conn.execute(_NOTIFY, (channel(target), ""))
        return found

    async def _await_answer(
        self, ident: str, arrived: trio.Event, name: str, call: str, owner: _Owner
    ) -> Any:
        while True:
            with trio.move_on_after(CHECK_EVERY):
                await arrived.wait()
            answer = await self._db.call(lambda conn: _collect(conn, ident))
            if answer is not None:
                await self._forget(ident, name)
                try:
                    return decode_answer(call, answer)
                except RowRefused as exc:
                    raise RoutingError(
                        name, call, f"its answer was refused: {shown(str(exc))}"
                    ) from None
            if not await self._still_owner(name, owner):
                raise owner_stopped(name, owner.owner, call)

    async def _forget(self, ident: str, name: str) -> None:
        """Delete a row whose answer was read; left behind, its owner prunes it."""
        try:
            await self._db.call(lambda conn: conn.execute(_DROP, (ident,)))
        except StoreError as exc:
            logger.warning("agent %r: a routed answer read could not be deleted: %s", name, exc)

    async def _still_owner(self, name: str, owner: _Owner) -> bool:
        current = await self._db.call(lambda conn: _owner_of(conn, name))
        if current != owner:
            return False
        return not self.ended(owner.owner)

    async def _withdraw(self, ident: str, name: str) -> None:
        """The caller has gone: drop its call, and have the owner stop serving it (shielded,
        for up to `_CANCEL_GRACE`). Withdrawn twice is withdrawn once (the second finds no
        row), so a withdrawal that failed is made again every `CHECK_EVERY`, on a new
        connection if the last one broke: given up, the call would run on for nobody."""
        why = f"not done within {_CANCEL_GRACE:g} s"
        with trio.move_on_after(_CANCEL_GRACE, shield=True):
            while True:
                try:
                    await self._db.call(lambda conn: self._cancel(conn, ident, name))
                    return
                except (AgentRTError, StoreError) as exc:
                    why = str(exc)
                await trio.sleep(CHECK_EVERY)
        logger.warning("agent %r: a routed call could not be withdrawn: %s", name, why)

    def _cancel(self, conn: psycopg.Connection[Any], ident: str, name: str) -> None:
        with conn.transaction():
            row = conn.execute("SELECT target, taken FROM routed WHERE id = %s", (ident,))
            found = row.fetchone()
            conn.execute(_DROP, (ident,))
            if found is not None and found[1]:  # taken: its owner is serving it
                cancel = (secrets.token_hex(12), found[0], self.me.runtime_id, name, "cancel")
                conn.execute(_SEND, (*cancel, encode_call("cancel", (ident,))))
                conn.execute(_NOTIFY, (channel(found[0]), ""))

    # --- the owner's side ---

    async def _serve_forever(self, serve: Serve, nursery: trio.Nursery) -> None:
        # Timed, not only when quiet: a busy owner puts back the rows of a lost claim too.
        sweep_at = trio.current_time() + SWEEP_EVERY
        while True:
            # A new event before the claim: a notification during it makes another claim.
            wake = self._work = trio.Event()
            try:
                rows = await self._db.call(lambda conn: _claim(conn, self.me.runtime_id))
            except StoreError as exc:
                # It may have committed: its rows are put back by the next sweep.
                logger.warning("routed calls could not be taken: %s", exc)
                rows = []
            # In the order they were sent: tells from one caller queue in that order.
            for _seq, ident, caller, name, call, arguments in sorted(rows):
                # Held even if taking it fails (a bug): such a row is not run again.
                self._held.add(ident)
                try:
                    self._take(serve, nursery, ident, caller, name, call, arguments)
                except Exception as exc:  # a bug: no row may end the serving of the others
                    logger.error("a routed call could not be taken", exc_info=exc)
            if len(rows) < _CLAIM_BATCH:
                with trio.move_on_at(sweep_at):
                    await wake.wait()
            if trio.current_time() >= sweep_at:
                await self._sweep()
                sweep_at = trio.current_time() + SWEEP_EVERY

    def _take(
        self,
        serve: Serve,
        nursery: trio.Nursery,
        ident: str,
        caller: str,
        name: str,
        call: str,
        row: bytes,
    ) -> None:
        """Start serving one claimed row: a caller's cancel (dropped, whether or not it
        decodes: nobody waits for its answer), or a call (`start_call`)."""
        if call == "cancel":
            try:
                (cancelled,) = decode_call(call, row)
            except RowRefused as exc:
                logger.warning(
                    "a routed cancel for agent %r from runtime %s was refused: %s",
                    shown(name),
                    shown(caller),
                    shown(str(exc)),
                )
            else:
                if (scope := self._serving.get(cancelled)) is not None:
                    scope.cancel()
            nursery.start_soon(self._drop, ident)
            return
        started = start_call(serve, caller, name, call, row)
        if isinstance(started, bytes):
            nursery.start_soon(self._serve_one, ident, caller, name, call, None, started)
        else:
            self._serving[ident] = trio.CancelScope()
            nursery.start_soon(self._serve_one, ident, caller, name, call, started, None)

    async def _serve_one(
        self,
        ident: str,
        caller: str,
        name: str,
        call: str,
        pending: Awaitable[object] | None,
        answer: bytes | None,
    ) -> None:
        """Finish a call: await it (``pending``), then send its answer."""
        if pending is not None:
            with self._serving[ident]:
                answer = await finish_call(name, call, pending)
            del self._serving[ident]
        if answer is None:  # cancelled by its caller, who wants no answer (and the row gone)
            self._held.discard(ident)
            return
        # An answer given up on keeps its row held: put back, its call would run again.
        if await self._send_answer(ident, caller, name, call, answer):
            self._held.discard(ident)

    async def _send_answer(
        self, ident: str, caller: str, name: str, call: str, answer: bytes
    ) -> bool:
        """Write an answer into its row and notify its caller (True once written); while
        that fails, again every `CHECK_EVERY`, on a new connection if the last one broke.
        The caller waits for as long as this runtime holds the name's lease, so an answer
        given up on would leave it waiting. Written twice is written once (the same
        answer into the same row; a row its caller has read or withdrawn meanwhile is
        gone). Given up after `PRUNE_AFTER`, when the answer would count as unread anyway."""
        give_up = trio.current_time() + PRUNE_AFTER
        failed = False
        while True:
            try:
                await self._db.call(lambda conn: _answer(conn, ident, caller, answer))
            except StoreError as exc:
                if trio.current_time() >= give_up:
                    logger.error(
                        "agent %r: the answer to a routed %s was lost: %s",
                        shown(name),
                        shown(call),
                        exc,
                    )
                    return False
                if not failed:
                    logger.warning(
                        "agent %r: the answer to a routed %s could not be written (%s); "
                        "sending it again every %g s",
                        shown(name),
                        shown(call),
                        exc,
                        CHECK_EVERY,
                    )
                    failed = True
                await trio.sleep(CHECK_EVERY)
                continue
            if failed:
                logger.info(
                    "agent %r: the answer to a routed %s was sent again", shown(name), shown(call)
                )
            return True

    async def _drop(self, ident: str) -> None:
        """Delete a cancel row once read: it has no answer, and nobody reads it."""
        try:
            await self._db.call(lambda conn: conn.execute(_DROP, (ident,)))
        except StoreError as exc:
            logger.warning("routed calls: a cancel could not be deleted: %s", exc)
        finally:
            # Not deleted, it is put back and read again: it cancels the same call again.
            self._held.discard(ident)

    async def _sweep(self) -> None:
        """Put back the rows of a claim that was lost (the next claim takes them), and
        prune the answers nobody read."""
        # Read here, in the task that adds to it: a row claimed after is not taken yet.
        held = list(self._held)
        try:
            put_back = await self._db.call(lambda conn: _unclaim(conn, self.me.runtime_id, held))
        except StoreError as exc:
            logger.warning("routed calls: rows of a lost claim could not be put back: %s", exc)
        else:
            if put_back:
                logger.warning(
                    "routed calls: %d marked taken by a claim that never came back, queued again",
                    put_back,
                )
        try:
            await self._db.call(lambda conn: conn.execute(_PRUNE, (self.me.runtime_id,)))
        except StoreError as exc:
            logger.warning("routed calls: old answers could not be pruned: %s", exc)

    # --- the channel ---

    async def _listen_forever(self, *, task_status: trio.TaskStatus[None]) -> None:
        import psycopg
        from psycopg import sql
        from psycopg.pq import ConnStatus

        ear = self.database()
        listen = sql.SQL("LISTEN {}").format(sql.Identifier(channel(self.me.runtime_id)))
        started = False
        while True:
            conn: psycopg.Connection[Any] | None = None
            try:
                conn = await trio.to_thread.run_sync(ear.connect)
                await trio.to_thread.run_sync(conn.execute, listen)
                if not started:
                    task_status.started()
                    started = True
                self._wake_all()  # whatever came while it was not listening
                while True:
                    await trio.lowlevel.wait_readable(conn.fileno())
                    conn.pgconn.consume_input()
                    if conn.pgconn.status != ConnStatus.OK:  # closed: readable for ever
                        raise psycopg.OperationalError("the server closed the connection")
                    while (note := conn.pgconn.notifies()) is not None:
                        self._heard(note.extra.decode())
            except (psycopg.Error, StoreError, OSError) as exc:
                why = redact(str(exc))
                if not started:
                    raise StoreError(ear.where, f"cannot listen for routed calls: {why}") from exc
                logger.warning("routed calls: the listening connection broke (%s)", why)
            finally:
                if conn is not None:
                    conn.close()
            await trio.sleep(CHECK_EVERY)

    def _heard(self, payload: str) -> None:
        if not payload:
            self._work.set()
        elif (arrived := self._answers.get(payload)) is not None:
            arrived.set()

    def _wake_all(self) -> None:
        self._work.set()
        for arrived in self._answers.values():
            arrived.set()


def _owner_of(conn: psycopg.Connection[Any], name: str) -> _Owner | None:
    row = conn.execute(_OWNER, (name,)).fetchone()
    if row is None:
        return None
    epoch, node, pid, start_time, runtime_id = row
    owner = LeaseOwner(node=node, pid=pid, start_time=start_time, runtime_id=runtime_id)
    return _Owner(epoch=epoch, owner=owner)


def _collect(conn: psycopg.Connection[Any], ident: str) -> bytes | None:
    row = conn.execute(_COLLECT, (ident,)).fetchone()
    return None if row is None else bytes(row[0])


def _claim(conn: psycopg.Connection[Any], target: str) -> list[tuple[Any, ...]]:
    return [(*row[:5], bytes(row[5])) for row in conn.execute(_CLAIM, (target,))]


def _unclaim(conn: psycopg.Connection[Any], target: str, held: list[str]) -> int:
    return conn.execute(_UNCLAIM, (target, held)).rowcount


def _answer(conn: psycopg.Connection[Any], ident: str, caller: str, answer: bytes) -> None:
    with conn.transaction():
        conn.execute(_ANSWER, (answer, ident))
        conn.execute(_NOTIFY, (channel(caller), ident))

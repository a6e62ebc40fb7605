"""Durable requests under hostile conditions: a store that fails a withdrawal, a release or
the lease renewals; withdrawals and cancellations racing a start; a lease passing mid-turn;
odd and oversized keys; keyed asks re-attached to by another caller; routed tells cancelled
once sent; outcomes past their retention. Two runtimes on one real SQLite file stand for
two programs (routed over its sockets), and PostgreSQL where a case is the store's."""

from __future__ import annotations

import functools
import secrets
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import trio
from proc_helpers import wait_for_status

from agentrt import (
    Agent,
    AgentRTError,
    AgentStopped,
    Completed,
    Event,
    Failed,
    InvalidOptions,
    OwnerDied,
    Pending,
    PostgresStore,
    Ref,
    ResultEvent,
    SQLiteStore,
    StopReason,
    StoreError,
    TextEvent,
    TurnFailed,
    Withdrawn,
    open_runtime,
)
from agentrt.store import LeaseOwner, RequestOutcome
from agentrt.testing import Gate, ScriptedBackend, reply

# The most UTF-8 bytes an idempotency key may have.
MAX_KEY_BYTES = 1024


def upper() -> ScriptedBackend:
    return ScriptedBackend(default=lambda call: reply(call.prompt.upper(), session_id="s"))


def held_then_upper() -> tuple[Gate, ScriptedBackend]:
    """A backend whose first turn waits at the gate once its session is said, and whose
    later turns answer their prompt in capitals."""
    gate = Gate()
    backend = ScriptedBackend(
        [*reply("x", session_id="s")[:1], gate, *reply("x")[1:]],
        default=lambda call: reply(call.prompt.upper(), session_id="s"),
    )
    return gate, backend


class _WithdrawFails(SQLiteStore):
    """Fails withdrawals while ``failing``, as a database locked by another program does."""

    failing = False

    async def withdraw_request(self, name: str, id: str, **kwargs: Any) -> bool:
        if self.failing:
            raise StoreError("<failing>", "database is locked")
        return await super().withdraw_request(name, id, **kwargs)


async def test_a_withdraw_the_store_failed_leaves_the_request_queued_and_one_outcome(
    tmp_path: Path,
) -> None:
    """A withdrawal the store refused raises `StoreError` and withdraws nothing: the
    request is neither reported withdrawn here while the store runs it, nor run after it
    was reported withdrawn; this program and the store give it one outcome."""
    store = _WithdrawFails(tmp_path / "s.sqlite3")
    gate, backend = held_then_upper()
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        await rt.tell("a", "first")
        await gate.wait_reached()
        queued = await rt.tell("a", "second")
        store.failing = True
        with pytest.raises(StoreError):
            await rt.withdraw(queued)
        store.failing = False
        assert isinstance(await rt.poll(queued), Pending)
        gate.release()
        with trio.fail_after(60):
            result = await rt.wait(queued)
        stored = await store.find_request("a", id=str(queued.id))
    assert isinstance(result, Completed) and result.response.text == "SECOND"
    assert stored is not None and stored.outcome is not None
    assert (stored.outcome.outcome, stored.outcome.answer) == ("complete", "SECOND")
    assert backend.prompts == ["first", "second"]


async def test_an_ask_cancelled_while_the_store_fails_its_withdrawal_settles_cancelled_everywhere(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An ask cancelled while queued, whose withdrawal the store fails: the caller sees
    its cancellation (not the store's error); the request, still queued in the store, is
    not reported withdrawn here (to run later all the same): it is stopped as its turn
    begins, and this program and the store both say `cancelled`."""
    store = _WithdrawFails(tmp_path / "s.sqlite3")
    gate, backend = held_then_upper()
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        await rt.tell("a", "first")
        await gate.wait_reached()
        store.failing = True
        asking = trio.CancelScope()

        async def ask() -> None:
            with asking:
                await rt.ask("a", "second", key="job-2")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await wait_for_status(rt, "a", lambda status: status.queued == 1)
            asking.cancel()
        assert asking.cancelled_caught
        store.failing = False
        ref = await rt.request("a", "job-2")
        assert ref is not None
        assert isinstance(await rt.poll(ref), Pending)
        gate.release()
        with trio.fail_after(60):
            result = await rt.wait(ref)
        stored = await store.find_request("a", key="job-2")
    assert isinstance(result, Failed) and isinstance(result.error, TurnFailed)
    assert result.error.reason is StopReason.CANCELLED
    assert stored is not None and stored.outcome is not None
    assert stored.outcome.outcome == "cancelled"
    assert backend.prompts == ["first"]
    assert "the store could not withdraw a request" in caplog.text


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_keys_every_store_keeps_are_kept_and_others_refused_naming_the_key(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    """A key is kept alike on SQLite and PostgreSQL (odd text, the longest key with the
    longest name, neither compressible), or refused with `InvalidOptions` before anything
    is stored: not a store's error (PostgreSQL's index row or NUL), nor a codec's."""
    store: Any = (
        SQLiteStore(tmp_path / "s.sqlite3")
        if kind == "sqlite"
        else PostgresStore(request.getfixturevalue("postgres_dsn"))
    )
    longest = "\U0001d11e" * 255  # 255 characters of 4 UTF-8 bytes each
    kept = {"a": [" ", "ключ-✓\n\t", secrets.token_hex(MAX_KEY_BYTES // 2)]}
    kept[longest] = [secrets.token_hex(MAX_KEY_BYTES // 2)]
    refused = {
        "k\x00": "NUL",
        "\udcff": "lone surrogate",
        secrets.token_hex(MAX_KEY_BYTES // 2) + "x": f"at most {MAX_KEY_BYTES}",
    }
    async with open_runtime(store=store) as rt:
        for name, keys in kept.items():
            await rt.start_agent(Agent, name=name, backend=upper())
            for key in keys:
                ref = await rt.tell(name, "p", key=key)
                assert await rt.tell(name, "again", key=key) == ref
                assert await rt.request(name, key) == ref
                assert isinstance(await rt.wait(ref), Completed)
        for key, why in refused.items():
            for call in (
                functools.partial(rt.tell, "a", "p", key=key),
                functools.partial(rt.ask, "a", "p", key=key),
                functools.partial(rt.request, "a", key),
            ):
                with pytest.raises(InvalidOptions, match=why) as caught:
                    await call()
                assert caught.value.key == "key"
        assert (await rt.status("a")).turns == 3


@pytest.mark.parametrize("policy", ["fail", "retry"])
async def test_an_answer_refused_before_the_new_owner_ended_its_request_is_not_a_second_outcome(
    tmp_path: Path, policy: str
) -> None:
    """The lease passes to another program while the turn runs, and the old owner's answer
    comes (refused by the store: `LeaseLost`) before the new owner has ended what the old
    one was running. The old owner's caller is not told the refused answer, which the
    store never keeps: it is told `OwnerDied`, what the store then settles; with
    ``retry`` (the new owner runs it again) `AgentStopped`, to re-attach for that run's."""
    path = tmp_path / "sessions.sqlite3"
    gate = Gate()
    held = ScriptedBackend([*reply("x", session_id="s")[:1], gate, *reply("x", session_id="s")[1:]])
    asked: list[object] = []
    answered = trio.Event()
    async with open_runtime(store=SQLiteStore(path), lease_ttl=600) as rt:
        await rt.start_agent(Agent, name="a", backend=held, on_owner_death=policy)

        async def ask() -> None:
            try:
                asked.append(await rt.ask("a", "p", key="job-1"))
            except AgentRTError as exc:
                asked.append(exc)
            answered.set()

        async with trio.open_nursery() as nursery, SQLiteStore(path) as other:
            nursery.start_soon(ask)
            await gate.wait_reached()
            [lease] = [lease for lease in await other.leases() if lease.name == "a"]
            owner = LeaseOwner(node="other", pid=1, start_time=1, runtime_id="other")
            await other.acquire_lease("a", owner, ttl=600, replacing=lease.epoch)
            gate.release()
            # The old owner's answer is refused, and its caller told; the new owner ends
            # the request after.
            with trio.fail_after(60):
                await answered.wait()
            await other.end_orphaned_requests("a", retry=policy == "retry", result_ttl=60)
            if policy == "retry":  # the new owner runs it once more, and answers
                [claimed] = [await other.claim_request("a")]
                assert claimed is not None
                done = RequestOutcome(outcome="complete", answer="again", session_id="s")
                assert await other.settle_request("a", claimed.id, done, result_ttl=60)
            stored = await other.find_request("a", key="job-1")
    assert stored is not None and stored.outcome is not None
    [outcome] = asked
    if policy == "retry":
        assert (stored.outcome.outcome, stored.outcome.answer) == ("complete", "again")
        assert isinstance(outcome, AgentStopped)
    else:
        assert stored.outcome.outcome == "owner_died"
        assert isinstance(outcome, OwnerDied) and outcome.session_id == "s"


async def test_a_queued_ask_withdrawn_by_its_key_s_ref_ends_its_asker_withdrawn(
    tmp_path: Path,
) -> None:
    """Another caller re-attaches to a queued keyed ask by its key and withdraws it: the
    asker is told so (`TurnFailed`, cancelled), the prompt never runs, and the store,
    this program and the asker agree."""
    gate, backend = held_then_upper()
    path = tmp_path / "s.sqlite3"
    asked: list[object] = []
    answered = trio.Event()
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        await rt.tell("a", "first")
        await gate.wait_reached()

        async def ask() -> None:
            try:
                asked.append(await rt.ask("a", "second", key="job-2"))
            except AgentRTError as exc:
                asked.append(exc)
            answered.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await wait_for_status(rt, "a", lambda status: status.queued == 1)
            ref = await rt.request("a", "job-2")
            assert ref is not None
            assert await rt.withdraw(ref)
            with trio.fail_after(60):  # told while the turn before it still runs
                await answered.wait()
            assert (await rt.status("a")).queued == 0
            assert isinstance(await rt.poll(ref), Withdrawn)
            gate.release()
            with trio.fail_after(60):
                assert (await rt.ask("a", "third")).text == "THIRD"
    [outcome] = asked
    assert isinstance(outcome, TurnFailed) and outcome.reason is StopReason.CANCELLED
    assert backend.prompts == ["first", "third"]


async def _tapped(rt: Any, name: str, ref: Ref) -> None:
    """Until a routed follower of ``ref`` reads agent ``name``'s events at its owner ``rt``
    (what it is given starts there)."""
    mailbox = rt._context.children[name].slot.mailbox
    with trio.fail_after(60):
        while ref.id not in (mailbox.taps or {}):  # noqa: ASYNC110 (no event to wait on)
            await trio.sleep(0.005)


async def test_a_running_keyed_ask_is_followed_live_by_its_key_s_ref_from_any_program(
    tmp_path: Path,
) -> None:
    """A keyed ask's ref, found by its key, is followed live while its turn runs, in the
    owner's program and from another one (routed), as a tell's is: its events as they
    come, then its result; `poll` says `Pending` meanwhile."""
    gate = Gate()
    backend = ScriptedBackend([gate, TextEvent(text="working"), *reply("done", session_id="s")])
    path = tmp_path / "s.sqlite3"
    seen: dict[str, list[Event]] = {"owner": [], "other": []}
    async with (
        open_runtime(store=SQLiteStore(path)) as rt,
        open_runtime(store=SQLiteStore(path)) as other,
    ):
        await rt.start_agent(Agent, name="a", backend=backend)

        async def follow(who: str, runtime: Any, ref: Ref) -> None:
            async with runtime.stream(ref) as stream:
                async for event in stream:
                    seen[who].append(event)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(rt.ask, "a", "p", "job")
            await gate.wait_reached()
            for who, runtime in (("owner", rt), ("other", other)):
                ref = await runtime.request("a", "job")
                assert ref is not None
                assert isinstance(await runtime.poll(ref), Pending)
                nursery.start_soon(follow, who, runtime, ref)
            await _tapped(rt, "a", ref)
            gate.release()
    for events in seen.values():
        assert isinstance(events[0], TextEvent) and events[0].text == "working"
        assert isinstance(events[-1], ResultEvent) and events[-1].text == "done"


async def test_a_request_handed_over_then_halted_before_its_turn_waits_unstarted(
    tmp_path: Path,
) -> None:
    """A tell to an agent waiting for work is stored started and handed over; the agent
    halts before its turn begins (as it reads its stored credential first): the request
    goes back to the store's queue unstarted, so the next program runs it rather than
    ending it `OwnerDied` for a turn that never began."""
    path = tmp_path / "s.sqlite3"
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(Agent, name="a", backend=upper())
        ref = await rt.tell("a", "later")
        await rt.halt("a")
        status = await wait_for_status(rt, "a", lambda status: status.state == "halted")
        assert status.queued == 1
        async with SQLiteStore(path) as other:
            stored = await other.find_request("a", id=str(ref.id))
        assert stored is not None and (stored.state, stored.epoch) == ("queued", None)
    backend = upper()
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        with trio.fail_after(60):
            result = await rt.wait(ref)
    assert isinstance(result, Completed) and result.response.text == "LATER"
    assert backend.prompts == ["later"]


class _HeldStart:
    """Holds each start_request's answer, once it is written, until ``go`` is set (a
    mixin of a store class)."""

    written: trio.Event | None = None
    go: trio.Event | None = None

    async def start_request(self, name: str, **kwargs: Any) -> str | None:
        id: str | None = await super().start_request(name, **kwargs)  # type: ignore[misc]
        if self.written is not None and self.go is not None:
            self.written.set()
            await self.go.wait()
        return id


class _HeldSQLite(_HeldStart, SQLiteStore):
    pass


class _HeldPostgres(_HeldStart, PostgresStore):
    pass


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_a_routed_tell_cancelled_once_its_owner_stored_it_returns_its_ref(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    """A tell routed to another program's agent, cancelled once the owner has begun
    storing its request, is a tell as a local one is: the request is stored and runs, and
    the tell returns its `Ref` (the cancellation is seen after), so the caller is not left
    without the ref of work it made."""
    store: _HeldSQLite | _HeldPostgres
    if kind == "sqlite":
        path = tmp_path / "s.sqlite3"
        store, opened = _HeldSQLite(path), SQLiteStore(path)
    else:
        dsn = request.getfixturevalue("postgres_dsn")
        store, opened = _HeldPostgres(dsn), PostgresStore(dsn)
    backend = upper()
    refs: list[Ref] = []
    async with open_runtime(store=store) as rt, open_runtime(store=opened) as other:
        await rt.start_agent(Agent, name="a", backend=backend)
        store.written, store.go = trio.Event(), trio.Event()
        telling = trio.CancelScope()

        async def tell() -> None:
            with telling:
                refs.append(await other.tell("a", "routed"))
                await trio.lowlevel.checkpoint()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(tell)
            await store.written.wait()
            telling.cancel()
            store.go.set()
        assert len(refs) == 1, (refs, await rt.status("a"), backend.prompts)
        with trio.fail_after(60):
            [ref] = refs
            result = await other.wait(ref)
    assert isinstance(result, Completed) and result.response.text == "ROUTED"
    assert backend.prompts == ["routed"]


class _ReleaseFails(SQLiteStore):
    """Fails every release_request, as a database locked by another program does."""

    async def release_request(self, name: str, id: str) -> bool:
        raise StoreError("<failing>", "database is locked")


async def test_a_request_the_store_keeps_started_is_not_withdrawn_here_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A request handed back to the queue whose release the store failed is still started
    in the store (it runs when its turn comes): `withdraw` says False, as for a running
    one, rather than `Withdrawn` here while it runs and settles in the store."""
    store, backend = _ReleaseFails(tmp_path / "s.sqlite3"), upper()
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        ref = await rt.tell("a", "later")
        await rt.halt("a")
        await wait_for_status(rt, "a", lambda status: status.state == "halted")
        assert "the store could not queue a request" in caplog.text
        assert not await rt.withdraw(ref)
        assert isinstance(await rt.poll(ref), Pending)
        await rt.unhalt("a")
        with trio.fail_after(60):
            result = await rt.wait(ref)
        stored = await store.find_request("a", id=str(ref.id))
    assert isinstance(result, Completed) and result.response.text == "LATER"
    assert stored is not None and stored.outcome is not None
    assert stored.outcome.outcome == "complete"
    assert backend.prompts == ["later"]


async def test_withdrawals_racing_their_starts_from_another_program_end_each_request_once(
    tmp_path: Path,
) -> None:
    """A second program tells 120 keyed prompts to the owner's agent and withdraws each
    as soon as it has its ref, racing the owner's starts: each request either was
    withdrawn (True; `Withdrawn` everywhere; its prompt never ran) or ran once and
    answered (False; `Completed` everywhere), and the store holds nothing queued at the
    end."""
    path = tmp_path / "s.sqlite3"
    backend = upper()
    count = 120
    said: dict[str, tuple[Ref, bool]] = {}
    async with (
        open_runtime(store=SQLiteStore(path)) as rt,
        open_runtime(store=SQLiteStore(path)) as other,
    ):
        await rt.start_agent(Agent, name="a", backend=backend)
        refs: trio.MemorySendChannel[tuple[str, Ref]]
        refs, taken = trio.open_memory_channel[tuple[str, Ref]](count)

        async def tell() -> None:
            async with refs:
                for n in range(count):
                    prompt = f"p{n}"
                    await refs.send((prompt, await other.tell("a", prompt, key=f"job-{n}")))

        async def withdraw() -> None:
            async with taken:
                async for prompt, ref in taken:
                    said[prompt] = (ref, await other.withdraw(ref))

        with trio.fail_after(120):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(tell)
                nursery.start_soon(withdraw)
            outcomes = {prompt: await other.wait(ref) for prompt, (ref, _) in said.items()}
        async with SQLiteStore(path) as reader:
            kept = {
                prompt: await reader.find_request("a", key=f"job-{prompt[1:]}") for prompt in said
            }
            unsettled = await reader.queued_requests("a")
    ran = Counter(backend.prompts)
    for prompt, (_ref, withdrawn) in said.items():
        stored = kept[prompt]
        assert stored is not None and stored.outcome is not None, prompt
        if withdrawn:
            assert isinstance(outcomes[prompt], Withdrawn), prompt
            assert stored.outcome.outcome == "withdrawn" and ran[prompt] == 0, prompt
        else:
            assert isinstance(outcomes[prompt], Completed), prompt
            assert stored.outcome.outcome == "complete" and ran[prompt] == 1, prompt
    assert set(ran) <= set(said) and not unsettled


class _HeldWithdraw(SQLiteStore):
    """Holds each withdraw_request, before it reaches the file, until ``go`` is set."""

    withdrawing: trio.Event | None = None
    go: trio.Event | None = None

    async def withdraw_request(self, name: str, id: str, **kwargs: Any) -> bool:
        if self.withdrawing is not None and self.go is not None:
            self.withdrawing.set()
            await self.go.wait()
        return await super().withdraw_request(name, id, **kwargs)


async def test_an_ask_cancelled_while_its_turn_starts_stops_that_turn(tmp_path: Path) -> None:
    """An ask is cancelled while queued, and the agent starts its turn while the store's
    withdrawal is on its way (which then finds it running): the turn is stopped
    (`cancelled`), as for an ask cancelled while it runs, not left to run for nobody."""
    store = _HeldWithdraw(tmp_path / "s.sqlite3")
    first, second = Gate(), Gate()
    backend = ScriptedBackend(
        [*reply("x", session_id="s")[:1], first, *reply("x")[1:]],
        [*reply("y", session_id="s")[:1], second, *reply("y")[1:]],
    )
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        await rt.tell("a", "first")
        await first.wait_reached()
        store.withdrawing, store.go = trio.Event(), trio.Event()
        asking = trio.CancelScope()

        async def ask() -> None:
            with asking:
                await rt.ask("a", "second", key="job-2")

        with trio.fail_after(60):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask)
                await wait_for_status(rt, "a", lambda status: status.queued == 1)
                asking.cancel()
                await store.withdrawing.wait()
                first.release()
                await second.wait_reached()  # its turn runs: the withdrawal will fail
                store.go.set()
        stored = await store.find_request("a", key="job-2")
    assert asking.cancelled_caught
    assert stored is not None and stored.outcome is not None
    assert stored.outcome.outcome == "cancelled"
    assert backend.prompts == ["first", "second"]


class _Clock:
    """A wall clock the test moves."""

    now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
async def test_an_owner_that_runs_on_drops_its_expired_outcomes(
    tmp_path: Path, kind: str, request: pytest.FixtureRequest
) -> None:
    """An owner that never restarts keeps a `result_ttl`'s worth of its agent's outcomes,
    not every answer since it started: those expired go as new ones are kept."""
    clock = _Clock()
    store: Any = (
        SQLiteStore(tmp_path / "s.sqlite3", clock=clock)
        if kind == "sqlite"
        else PostgresStore(request.getfixturevalue("postgres_dsn"), clock=clock)
    )
    async with open_runtime(store=store) as rt:
        await rt.start_agent(Agent, name="a", backend=upper(), result_ttl=60)
        for n in range(5):
            await rt.ask("a", f"p{n}", key=f"job-{n}")
        clock.now += 61
        await rt.ask("a", "later", key="job-later")
        kept = [await store.find_request("a", key=f"job-{n}") for n in range(5)]
        counted = await store._call(
            lambda conn: conn.execute("SELECT COUNT(*) FROM requests").fetchone()
        )
    assert kept == [None] * 5
    assert counted[0] == 1


class _RenewalsFail(SQLiteStore):
    """Fails lease renewals while ``failing``, as a database locked by another program."""

    failing = False

    async def renew_leases(self, *, ttl: float) -> Any:
        if self.failing:
            raise StoreError("<failing>", "database is locked")
        return await super().renew_leases(ttl=ttl)


async def test_a_fenced_agent_leaves_its_queue_to_the_name_s_next_owner(tmp_path: Path) -> None:
    """The store fails the renewals past half the lease (a file locked by another program),
    so the runtime fences the agent: its callers get `AgentStopped`, and its queued
    requests stay queued in the store, which is back (no one took the name), for the next
    owner, which runs them; not withdrawn, the work lost."""
    path = tmp_path / "s.sqlite3"
    store = _RenewalsFail(path)
    gate = Gate()
    held = ScriptedBackend([*reply("x", session_id="s")[:1], gate, *reply("x")[1:]])
    async with open_runtime(store=store, lease_ttl=4, kill_grace=0.5) as rt:
        await rt.start_agent(Agent, name="a", backend=held)
        running = await rt.tell("a", "first")
        await gate.wait_reached()
        queued = [await rt.tell("a", f"p{n}", key=f"job-{n}") for n in range(3)]
        store.failing = True
        with trio.fail_after(60):  # the fence ends the running turn
            stopped = await rt.wait(running)
        assert isinstance(stopped, Failed) and "lease lost" in str(stopped.error)
        store.failing = False
    backend = upper()
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(Agent, name="a", backend=backend)
        with trio.fail_after(60):
            results = [await rt.wait(ref) for ref in queued]
    assert [r.response.text for r in results if isinstance(r, Completed)] == ["P0", "P1", "P2"]
    assert backend.prompts == ["p0", "p1", "p2"]


class _PurgeFails(SQLiteStore):
    """Fails purge_requests, as a PostgreSQL deadlock with a settlement does."""

    async def purge_requests(self) -> int:
        raise StoreError("<failing>", "deadlock detected")


async def test_a_purge_the_store_fails_does_not_fail_the_agent_s_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Purging expired outcomes as an owner starts is housekeeping: a store that fails it
    (a deadlock with another agent's settlement deleting the same rows) is logged, and the
    agent starts and runs the queue it adopts."""
    path = tmp_path / "s.sqlite3"
    async with open_runtime(store=SQLiteStore(path)) as rt:
        await rt.start_agent(Agent, name="a", backend=upper())
        await rt.halt("a")
        ref = await rt.tell("a", "queued")
    async with open_runtime(store=_PurgeFails(path)) as rt:
        await rt.start_agent(Agent, name="a", backend=upper())
        with trio.fail_after(60):
            result = await rt.wait(ref)
    assert isinstance(result, Completed) and result.response.text == "QUEUED"
    assert "could not purge expired requests" in caplog.text

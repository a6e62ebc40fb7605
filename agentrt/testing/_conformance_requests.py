"""Conformance checks of durable requests (`RequestStore`): the queue and its bounds and
keys, the claim fenced by the lease epoch, the settlement (alone and with the turn's
record), the start of a request its owner runs at once, and what a new owner does with
the requests a dead one was running. The state machine of all of it is in
`_conformance_request_machine`.
"""

from __future__ import annotations

import functools

import trio

from .._errors import LeaseLost, MailboxFull, StoreError
from .._records import OWNER_DIED, WITHDRAWN, RequestOutcome
from .._stores._protocols import (
    LeaseStore,
    SessionStore,
    StoreCapabilities,
)
from .._stores._request_store import RequestStore
from ._conformance_kit import (
    _A,
    _B,
    StoreHarness,
    _check,
    _checkpoint,
    _closing,
    _loaded,
    _open,
    _raises,
    _turn,
)

# Bounds the checks queue under.
_BOUNDS = {"max_pending": 3, "max_pending_bytes": 20}
_TTL = 3600.0


def _leases_too(harness: StoreHarness) -> str | None:
    store = harness.open_handle()
    if StoreCapabilities.of(store).leases is None:
        return f"{type(store).__name__} is not a LeaseStore (a claim is fenced by a lease)"
    return None


def _hypothesis_and_leases(harness: StoreHarness) -> str | None:
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        return "needs hypothesis"
    return _leases_too(harness)


async def _handle(harness: StoreHarness) -> tuple[SessionStore, RequestStore, LeaseStore]:
    store = await _open(harness)
    capabilities = StoreCapabilities.of(store)
    assert capabilities.requests is not None and capabilities.leases is not None
    return store, capabilities.requests, capabilities.leases


async def _enqueue(
    requests: RequestStore, name: str, id: str, prompt: str, key: str | None = None
) -> str:
    return await requests.enqueue_request(
        name, id=id, prompt=prompt, key=key, origin="tell", **_BOUNDS
    )


async def _queued(requests: RequestStore, name: str) -> list[str]:
    return [request.id for request in await requests.queued_requests(name)]


@_check(RequestStore, _leases_too)
async def _requests_queue_in_order_under_the_bounds_and_a_key_is_stored_once(
    harness: StoreHarness,
) -> None:
    store, requests, _ = await _handle(harness)
    clock = harness.clock
    try:
        assert await _enqueue(requests, "coder", "r1", "first") == "r1"  # needs no session row
        assert await _enqueue(requests, "coder", "r2", "second", key="job-42") == "r2"
        # The same key again: the first request's id, nothing stored (not even its prompt).
        assert await _enqueue(requests, "coder", "r3", "other", key="job-42") == "r2"
        with _raises(StoreError, match="'r1'"):  # an id the agent has
            await _enqueue(requests, "coder", "r1", "again")
        with _raises(MailboxFull) as full:  # 5 + 6 + 10 bytes > 20
            await _enqueue(requests, "coder", "r4", "x" * 10)
        assert (full[0].limit, full[0].queued, full[0].queued_bytes) == ("max_pending_bytes", 2, 11)
        assert type(full[0].queued_bytes) is int
        assert await _enqueue(requests, "coder", "r4", "four") == "r4"
        with _raises(MailboxFull) as full:  # three queued
            await _enqueue(requests, "coder", "r5", "5")
        assert (full[0].limit, full[0].maximum) == ("max_pending", 3)
        assert await _enqueue(requests, "other", "r1", "its own queue") == "r1"
        assert await _queued(requests, "coder") == ["r1", "r2", "r4"]
        [first, *_] = await requests.queued_requests("coder")
        assert (first.name, first.prompt, first.key, first.origin, first.state) == (
            "coder",
            "first",
            None,
            "tell",
            "queued",
        )
        assert (first.epoch, first.attempts, first.outcome) == (None, 0, None)
        if clock is not None:
            assert first.accepted_at == clock.now
        assert await requests.withdraw_request("coder", "r2", result_ttl=_TTL)
        assert not await requests.withdraw_request("coder", "r2", result_ttl=_TTL)  # settled
        assert not await requests.withdraw_request("coder", "nope", result_ttl=_TTL)
        withdrawn = await requests.find_request("coder", key="job-42")
        assert withdrawn is not None and withdrawn.id == "r2" and withdrawn.state == "settled"
        assert withdrawn.outcome == RequestOutcome(outcome=WITHDRAWN)
        assert withdrawn.prompt is None  # kept only while the request waits or runs
        assert await requests.find_request("other", key="job-42") is None  # keys are per agent
    finally:
        await _closing(store)
    store, requests, _ = await _handle(harness)  # the queue outlives the handle
    try:
        assert await _queued(requests, "coder") == ["r1", "r4"]
        assert await _queued(requests, "other") == ["r1"]
    finally:
        await _closing(store)


@_check(RequestStore)
async def _racing_enqueues_from_many_handles_keep_the_bounds_and_a_key_once(
    harness: StoreHarness,
) -> None:
    handles = [await _open(harness) for _ in range(4)]
    queues: list[RequestStore] = []
    for store in handles:
        requests = StoreCapabilities.of(store).requests
        assert requests is not None
        queues.append(requests)
    accepted: list[str] = []
    refused: list[MailboxFull] = []
    keyed: list[str] = []

    async def send(requests: RequestStore, h: int) -> None:
        for n in range(3):
            try:
                accepted.append(await _enqueue(requests, "coder", f"h{h}-{n}", "p"))
            except MailboxFull as full:
                refused.append(full)

    async def send_keyed(requests: RequestStore, h: int) -> None:
        keyed.append(await _enqueue(requests, "other", f"k{h}", "p", key="job"))

    try:
        async with trio.open_nursery() as nursery:
            for h, requests in enumerate(queues):
                nursery.start_soon(send, requests, h)
        # Of 12 enqueues under max_pending=3, three are stored, whichever handle won.
        assert len(accepted) == 3 and len(refused) == 9
        assert all(full.limit == "max_pending" for full in refused)
        assert sorted(await _queued(queues[0], "coder")) == sorted(accepted)
        async with trio.open_nursery() as nursery:
            for h, requests in enumerate(queues):
                nursery.start_soon(send_keyed, requests, h)
        # One key from four handles at once: one request stored, its id given to all.
        stored = await _queued(queues[0], "other")
        assert len(stored) == 1 and keyed == stored * 4
    finally:
        await _closing(*handles)


@_check(RequestStore, _leases_too)
async def _a_claim_needs_the_lease_and_a_stale_epoch_starts_nothing(
    harness: StoreHarness,
) -> None:
    one, requests, leases = await _handle(harness)
    two, requests_two, leases_two = await _handle(harness)
    try:
        for id in ("r1", "r2", "r3"):
            await _enqueue(requests, "coder", id, id)
        with _raises(StoreError, match="hold the lease of agent 'coder'"):
            await requests.claim_request("coder")
        lease = await leases.acquire_lease("coder", _A, ttl=harness.ttl)
        await _checkpoint(one, "coder", "s-1")
        claimed = await requests.claim_request("coder")
        assert claimed is not None
        assert (claimed.id, claimed.state, claimed.epoch, claimed.attempts) == (
            "r1",
            "running",
            lease.epoch,
            1,
        )
        assert await _queued(requests_two, "coder") == ["r2", "r3"]
        # Another program finds the owner dead (frozen, say) and takes the agent over.
        taken = await leases_two.acquire_lease("coder", _B, ttl=harness.ttl, replacing=lease.epoch)
        with _raises(LeaseLost):  # the frozen owner wakes: it claims nothing
            await requests.claim_request("coder")
        with _raises(LeaseLost):  # nor settles what it ran
            await requests.settle_request(
                "coder", "r1", RequestOutcome(outcome="complete", answer="late"), result_ttl=_TTL
            )
        assert await _queued(requests_two, "coder") == ["r2", "r3"]
        [died] = await requests_two.end_orphaned_requests("coder", retry=False, result_ttl=_TTL)
        assert (died.id, died.state, died.attempts) == ("r1", "settled", 1)
        assert died.outcome is not None
        assert (died.outcome.outcome, died.outcome.session_id) == (OWNER_DIED, "s-1")
        assert await requests_two.end_orphaned_requests("coder", retry=False, result_ttl=_TTL) == ()
        second = await requests_two.claim_request("coder")
        assert second is not None and (second.id, second.epoch) == ("r2", taken.epoch)
        # The request the dead owner ran is settled once: its late answer is refused.
        assert not await requests_two.settle_request(
            "coder", "r1", RequestOutcome(outcome="complete"), result_ttl=_TTL
        )
    finally:
        await _closing(one, two)


@_check(RequestStore, _leases_too)
async def _a_request_its_owner_runs_at_once_is_stored_started_in_one_write(
    harness: StoreHarness,
) -> None:
    one, requests, leases = await _handle(harness)
    two, requests_two, leases_two = await _handle(harness)
    start = functools.partial(requests.start_request, "coder", origin="ask")
    try:
        with _raises(StoreError, match="hold the lease of agent 'coder'"):
            await start(id="r0", prompt="p", key=None)
        assert await requests.find_request("coder", id="r0") is None
        lease = await leases.acquire_lease("coder", _A, ttl=harness.ttl)
        assert await start(id="r1", prompt="first", key="job-1") == "r1"
        started = await requests.find_request("coder", id="r1")
        assert started is not None
        assert (started.state, started.epoch, started.attempts, started.key, started.origin) == (
            "running",
            lease.epoch,
            1,
            "job-1",
            "ask",
        )
        assert started.prompt == "first" and await _queued(requests, "coder") == []
        # A key kept already: its request's id, nothing stored; an id the agent has.
        assert await start(id="r2", prompt="other", key="job-1") == "r1"
        with _raises(StoreError, match="'r1'"):
            await start(id="r1", prompt="again", key=None)
        # Busy (r1 runs): nothing stored; the caller enqueues it behind.
        assert await start(id="r2", prompt="second", key=None) is None
        assert await requests.find_request("coder", id="r2") is None
        await _enqueue(requests, "coder", "r2", "second")
        # keep=0 (the agent keeps no history): its turn counted in the session row only.
        await _checkpoint(one, "coder", "s-1")
        assert await requests.settle_request(
            "coder",
            "r1",
            RequestOutcome(outcome="complete"),
            result_ttl=_TTL,
            turn=_turn("coder", 1),
            session_id="s-1",
            keep=0,
        )
        assert (await _loaded(one, "coder")).turns == 1
        if (history := StoreCapabilities.of(one).turn_history) is not None:
            assert list(await history.turn_history("coder", limit=5)) == []
        assert await start(id="r3", prompt="third", key=None) is None  # r2 is queued
        # Released: back in the queue in its place, as never started.
        claimed = await requests.claim_request("coder")
        assert claimed is not None and claimed.id == "r2"
        await _enqueue(requests, "coder", "r3", "third")
        assert await requests.release_request("coder", "r2")
        assert not await requests.release_request("coder", "r2")  # not running now
        assert await _queued(requests, "coder") == ["r2", "r3"]
        again = await requests.find_request("coder", id="r2")
        assert again is not None and (again.state, again.epoch, again.attempts) == (
            "queued",
            None,
            0,
        )
        claimed = await requests.claim_request("coder")
        assert claimed is not None and (claimed.id, claimed.attempts) == ("r2", 1)
        # A frozen owner that wakes starts nothing, and releases nothing.
        await leases_two.acquire_lease("coder", _B, ttl=harness.ttl, replacing=lease.epoch)
        with _raises(LeaseLost):
            await start(id="r4", prompt="late", key=None)
        with _raises(LeaseLost):
            await requests.release_request("coder", "r2")
        assert await requests_two.find_request("coder", id="r4") is None
        [died] = await requests_two.end_orphaned_requests("coder", retry=False, result_ttl=_TTL)
        assert died.id == "r2" and died.state == "settled"
    finally:
        await _closing(one, two)


@_check(RequestStore, _leases_too)
async def _a_request_that_ran_when_its_owner_died_runs_once_more_where_asked(
    harness: StoreHarness,
) -> None:
    one, requests, leases = await _handle(harness)
    try:
        for id in ("r1", "r2"):
            await _enqueue(requests, "coder", id, id)
        lease = await leases.acquire_lease("coder", _A, ttl=harness.ttl)
        assert (await requests.claim_request("coder")) is not None
    finally:
        await _closing(one)  # the program dies: no release, no settlement
    epoch = lease.epoch
    for attempt in (1, 2):
        store, requests, leases = await _handle(harness)
        try:
            lease = await leases.acquire_lease("coder", _B, ttl=harness.ttl, replacing=epoch)
            epoch = lease.epoch
            [orphan] = await requests.end_orphaned_requests("coder", retry=True, result_ttl=_TTL)
            if attempt == 1:  # back at the head of the queue, in its place
                assert (orphan.id, orphan.state, orphan.epoch) == ("r1", "queued", None)
                assert await _queued(requests, "coder") == ["r1", "r2"]
                again = await requests.claim_request("coder")
                assert again is not None and (again.id, again.attempts) == ("r1", 2)
            else:  # started twice already: it ends, even where retry is asked
                assert orphan.outcome is not None
                assert (orphan.id, orphan.outcome.outcome) == ("r1", OWNER_DIED)
                assert await _queued(requests, "coder") == ["r2"]
        finally:
            await _closing(store)


@_check(RequestStore, _leases_too)
async def _a_settled_request_is_read_by_id_or_key_until_its_ttl(harness: StoreHarness) -> None:
    store, requests, leases = await _handle(harness)
    reader, read, _ = await _handle(harness)  # another program, waiting on the key
    clock = harness.clock
    try:
        await _enqueue(requests, "coder", "r1", "hello", key="job-1")
        await _enqueue(requests, "coder", "r2", "world")
        await leases.acquire_lease("coder", _A, ttl=harness.ttl)
        await _checkpoint(store, "coder", "s-1")
        running = await read.find_request("coder", key="job-1")
        assert running is not None and running.state == "queued"
        claimed = await requests.claim_request("coder")
        assert claimed is not None and claimed.prompt == "hello"
        answer = RequestOutcome(outcome="complete", answer="hi", session_id="s-1")
        history = StoreCapabilities.of(store).turn_history
        turn = _turn("coder", 1)
        if history is None:
            assert await requests.settle_request("coder", "r1", answer, result_ttl=60.0)
        else:
            assert await requests.settle_request(
                "coder", "r1", answer, result_ttl=60.0, turn=turn, session_id="s-1", keep=5
            )
            # One transaction: the turn's record with it.
            assert list(await history.turn_history("coder", limit=5)) == [turn]
            assert (await _loaded(store, "coder")).turns == 1
        assert not await requests.settle_request("coder", "r1", answer, result_ttl=60.0)
        settled = await read.find_request("coder", key="job-1")
        assert settled is not None and settled.outcome == answer and settled.prompt is None
        assert settled == await read.find_request("coder", id="r1")
        assert settled.settled_at is not None and settled.expires_at is not None
        assert settled.expires_at - settled.settled_at == 60.0
        failed = RequestOutcome(outcome="cli_error", error="token sk-ant-api03-abcdefghijklmnop")
        assert (await requests.claim_request("coder")) is not None
        if history is not None:  # without its session row the turn is refused: both or none
            await store.forget("coder")
            with _raises(StoreError, match="no session row"):
                await requests.settle_request(
                    "coder", "r2", failed, result_ttl=10.0, turn=_turn("coder", 2), keep=5
                )
            still = await read.find_request("coder", id="r2")
            assert still is not None and still.state == "running"
        assert await requests.settle_request("coder", "r2", failed, result_ttl=10.0)
        second = await read.find_request("coder", id="r2")
        assert second is not None and second.outcome is not None
        assert second.outcome.error is not None and "abcdefghijklmnop" not in second.outcome.error
        if clock is None:
            return
        clock.advance(30.0)  # r2's ttl has passed, r1's has not
        assert await read.find_request("coder", id="r2") is None
        assert await read.purge_requests() == 1
        assert await read.find_request("coder", key="job-1") is not None
        clock.advance(31.0)
        assert await read.find_request("coder", key="job-1") is None
        # An expired key is free again: a new request is stored under it.
        assert await _enqueue(read, "coder", "r3", "again", key="job-1") == "r3"
        assert await read.purge_requests() == 0  # the enqueue took the expired one away
        assert await read.find_request("coder", key="job-1") == await read.find_request(
            "coder", id="r3"
        )
    finally:
        await _closing(store, reader)


@_check(RequestStore)
async def _bad_arguments_are_refused_naming_them(harness: StoreHarness) -> None:
    store = await _open(harness)
    requests = StoreCapabilities.of(store).requests
    assert requests is not None
    try:
        with _raises(ValueError, match="max_pending must be an int >= 0"):
            await requests.enqueue_request(
                "x",
                id="1",
                prompt="p",
                key=None,
                origin="tell",
                max_pending=-1,
                max_pending_bytes=9,
            )
        with _raises(ValueError, match="result_ttl must be a finite number"):
            await requests.withdraw_request("x", "1", result_ttl=float("inf"))
        with _raises(ValueError, match="one of id= or key="):
            await requests.find_request("x")
        assert await _queued(requests, "x") == []
    finally:
        await _closing(store)

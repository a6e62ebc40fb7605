"""The conformance kit's state machine of durable requests (`RequestStore`, hypothesis):
callers, owners that crash or freeze, and the queue of one agent against a plain model."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Awaitable, Callable
from typing import TypeVar

import attrs
import trio

from .._errors import LeaseLost, MailboxFull
from .._records import OWNER_DIED, WITHDRAWN, RequestOutcome
from .._stores._protocols import SessionStore
from .._stores._request_store import RequestStore
from ._conformance_kit import _B, StoreHarness, _check
from ._conformance_requests import _TTL, _enqueue, _handle, _hypothesis_and_leases, _queued

_T = TypeVar("_T")


@attrs.define
class _Model:
    """What the queue of one agent should hold: ids in acceptance order, and each id's
    state, prompt size, key and starts."""

    order: list[str] = attrs.field(factory=list)
    state: dict[str, str] = attrs.field(factory=dict)
    size: dict[str, int] = attrs.field(factory=dict)
    keys: dict[str, str] = attrs.field(factory=dict)
    starts: dict[str, int] = attrs.field(factory=dict)
    # Running ids, with the epoch that started each.
    running: dict[str, int] = attrs.field(factory=dict)

    def queued(self) -> list[str]:
        return [id for id in self.order if self.state[id] == "queued"]


@_check(RequestStore, _hypothesis_and_leases)
async def _each_request_starts_at_most_once_across_crashes_and_frozen_owners(
    harness: StoreHarness,
) -> None:
    """A state machine (hypothesis): callers enqueue (some with keys) and withdraw through
    a handle of their own; the owner starts requests at once (`start_request`), claims,
    releases and settles; owners crash (their handle closed
    with nothing released or settled) or freeze (a new owner takes over while the old
    handle stays open and tries again later); each new owner ends or requeues the requests
    it finds orphaned. After every step the queue is the model's, in order, and no request
    has started more often than the model allows: once, twice only when handed back."""
    from hypothesis import settings
    from hypothesis import strategies as st
    from hypothesis.stateful import (
        RuleBasedStateMachine,
        invariant,
        precondition,
        rule,
        run_state_machine_as_test,
    )

    examples = itertools.count()

    def call(work: Callable[[], Awaitable[_T]]) -> _T:
        async def run() -> _T:
            return await work()

        return trio.from_thread.run(run)

    class QueueMachine(RuleBasedStateMachine):
        def __init__(self) -> None:
            super().__init__()
            self.name = f"q{next(examples)}"
            self.caller, self.requests, _ = call(lambda: _handle(harness))
            self.owner: tuple[SessionStore, RequestStore, int] | None = None
            self.frozen: tuple[SessionStore, RequestStore, int] | None = None
            self.model = _Model()
            self.ids = itertools.count()
            self._take_over()

        def _take_over(self) -> None:
            """A new program owns the agent: it takes the lease (replacing the last
            holder's) and deals with what the last owner left running."""
            store, requests, leases = call(lambda: _handle(harness))
            last = None if self.owner is None else self.owner[2]
            lease = call(lambda: leases.acquire_lease(self.name, _B, ttl=60.0, replacing=last))
            self.owner = (store, requests, lease.epoch)

        def _orphans(self, retry: bool) -> None:
            assert self.owner is not None
            requests = self.owner[1]
            found = call(
                lambda: requests.end_orphaned_requests(self.name, retry=retry, result_ttl=_TTL)
            )
            model = self.model
            expected = [id for id in model.order if id in model.running]
            assert [request.id for request in found] == expected
            for request in found:
                del model.running[request.id]
                again = retry and model.starts[request.id] < 2
                model.state[request.id] = "queued" if again else OWNER_DIED
                assert request.state == ("queued" if again else "settled")

        def teardown(self) -> None:
            handles = [self.caller]
            handles += [h[0] for h in (self.owner, self.frozen) if h is not None]
            for store in handles:
                call(store.aclose)

        @rule(key=st.sampled_from([None, "k0", "k1"]), size=st.integers(1, 9))
        def enqueue(self, key: str | None, size: int) -> None:
            model, id = self.model, f"r{next(self.ids)}"
            prompt = "p" * size
            try:
                got = call(lambda: _enqueue(self.requests, self.name, id, prompt, key))
            except MailboxFull as full:
                queued = model.queued()
                assert key not in model.keys
                assert full.queued == len(queued)
                assert full.queued_bytes == sum(model.size[q] for q in queued)
                assert len(queued) >= 3 or full.queued_bytes + size > 20
                return
            if key in model.keys:
                assert got == model.keys[key]
                return
            queued = model.queued()
            assert len(queued) < 3 and sum(model.size[q] for q in queued) + size <= 20
            assert got == id
            model.order.append(id)
            model.state[id], model.size[id], model.starts[id] = "queued", size, 0
            if key is not None:
                model.keys[key] = id

        @rule(key=st.sampled_from([None, "k0", "k1"]), size=st.integers(1, 9))
        def start(self, key: str | None, size: int) -> None:
            """The owner stores a request already started: when none waits or runs."""
            assert self.owner is not None
            _, requests, epoch = self.owner
            model, id = self.model, f"r{next(self.ids)}"
            got = call(
                lambda: requests.start_request(
                    self.name, id=id, prompt="p" * size, key=key, origin="ask"
                )
            )
            if key in model.keys:
                assert got == model.keys[key]
                return
            busy = model.running or model.queued()
            assert got == (None if busy else id)
            if got is None:
                return
            model.order.append(id)
            model.state[id], model.size[id], model.starts[id] = "running", size, 1
            model.running[id] = epoch
            if key is not None:
                model.keys[key] = id

        @rule()
        def release(self) -> None:
            assert self.owner is not None
            _, requests, epoch = self.owner
            mine = [id for id, by in self.model.running.items() if by == epoch]
            if not mine:
                return
            id = mine[0]
            assert call(lambda: requests.release_request(self.name, id))
            del self.model.running[id]
            self.model.state[id] = "queued"
            self.model.starts[id] -= 1

        @precondition(lambda self: bool(self.model.order))
        @rule(data=st.data())
        def withdraw(self, data: st.DataObject) -> None:
            id = data.draw(st.sampled_from(self.model.order))
            done = call(lambda: self.requests.withdraw_request(self.name, id, result_ttl=_TTL))
            assert done == (self.model.state[id] == "queued")
            if done:
                self.model.state[id] = WITHDRAWN

        @rule()
        def claim(self) -> None:
            assert self.owner is not None
            _, requests, epoch = self.owner
            claimed = call(lambda: requests.claim_request(self.name))
            queued = self.model.queued()
            if not queued:
                assert claimed is None
                return
            assert claimed is not None and claimed.id == queued[0]
            self.model.starts[claimed.id] += 1
            assert claimed.attempts == self.model.starts[claimed.id]
            self.model.state[claimed.id] = "running"
            self.model.running[claimed.id] = epoch

        @rule()
        def settle(self) -> None:
            assert self.owner is not None
            _, requests, epoch = self.owner
            mine = [id for id, by in self.model.running.items() if by == epoch]
            if not mine:
                return
            id, complete = mine[0], RequestOutcome(outcome="complete")
            settle = functools.partial(requests.settle_request, self.name, id, complete)
            assert call(functools.partial(settle, result_ttl=_TTL))
            del self.model.running[id]
            self.model.state[id] = "complete"

        @rule(retry=st.booleans(), freeze=st.booleans())
        def owner_dies(self, retry: bool, freeze: bool) -> None:
            """The owner crashes (its handle closed) or freezes (kept, to wake later)."""
            assert self.owner is not None
            old = self.owner
            if freeze:
                if self.frozen is not None:
                    call(self.frozen[0].aclose)
                self.frozen = old
            else:
                call(old[0].aclose)
            self._take_over()
            self._orphans(retry)

        @precondition(lambda self: self.frozen is not None)
        @rule()
        def frozen_owner_wakes(self) -> None:
            assert self.frozen is not None
            requests = self.frozen[1]
            try:
                call(lambda: requests.claim_request(self.name))
            except LeaseLost:
                pass
            else:
                raise AssertionError("a stale epoch claimed")
            try:
                call(
                    lambda: requests.settle_request(
                        self.name, "r0", RequestOutcome(outcome="complete"), result_ttl=_TTL
                    )
                )
            except LeaseLost:
                pass
            else:
                raise AssertionError("a stale epoch settled")
            try:
                call(
                    lambda: requests.start_request(
                        self.name, id="late", prompt="p", key=None, origin="tell"
                    )
                )
            except LeaseLost:
                pass
            else:
                raise AssertionError("a stale epoch started a request")

        @invariant()
        def the_queue_is_the_models(self) -> None:
            assert call(lambda: _queued(self.requests, self.name)) == self.model.queued()
            find = functools.partial(self.requests.find_request, self.name)
            for id, state in self.model.state.items():
                stored = call(functools.partial(find, id=id))
                assert stored is not None and stored.attempts == self.model.starts[id]
                if state in ("queued", "running"):
                    assert (stored.state, stored.outcome) == (state, None)
                    assert stored.prompt is not None and len(stored.prompt) == self.model.size[id]
                else:
                    assert stored.state == "settled" and stored.outcome is not None
                    assert stored.prompt is None
                    assert stored.outcome.outcome == state

    chosen = settings(max_examples=40, stateful_step_count=25, deadline=None)
    await trio.to_thread.run_sync(lambda: run_state_machine_as_test(QueueMachine, settings=chosen))

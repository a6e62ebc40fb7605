"""The store conformance kit's frame: the harness, a check and how checks are registered,
and the helpers the checks share (doing what pytest would).
"""

from __future__ import annotations

import math
import re
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import attrs
import trio

from .._events import Usage
from .._records import (
    LeaseOwner,
    SessionRecord,
    StoredTurn,
    StoredWorkspace,
)
from .._stores._protocols import (
    SessionStore,
    StoreCapabilities,
)

_E = TypeVar("_E", bound=BaseException)


@attrs.define
class ManualClock:
    """A clock a check moves by hand (``advance``); pass it to a store as its wall or lease
    clock, and to the harness."""

    now: float = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@attrs.frozen
class StoreHarness:
    """How the checks reach a store.

    ``open_handle()`` makes a new handle, not opened yet, on this harness's data (empty at
    first): the first is the store under test; the lease checks open a second one, as
    another program sharing the data has (its own open state and leases). ``clock`` is the
    wall clock the handles stamp records with and ``lease_clock`` the one they time
    leases on, when the store takes clocks (`ManualClock`); None means real time: the
    checks then skip exact timestamps, and wait ``ttl`` (keep it short, 2 s say) for a
    lease to expire.
    """

    open_handle: Callable[[], SessionStore]
    clock: ManualClock | None = None
    lease_clock: ManualClock | None = None
    ttl: float = 10.0

    async def advance(self, seconds: float) -> None:
        """Let ``seconds`` pass on the lease clock."""
        if self.lease_clock is None:
            await trio.sleep(seconds)
        else:
            self.lease_clock.advance(seconds)


Body = Callable[[StoreHarness], Awaitable[None]]


@attrs.frozen
class StoreCheck:
    """One conformance check: ``name``, the protocol it needs (``requires``), and
    ``run()``, which raises `AssertionError` (or the store's exception) when the store
    fails it. `skipped` says why it does not apply (None: it does)."""

    name: str
    requires: type
    harness: StoreHarness = attrs.field(repr=False)
    _body: Body = attrs.field(repr=False)
    _needs: Callable[[StoreHarness], str | None] = attrs.field(repr=False)

    def skipped(self) -> str | None:
        """Why this check does not apply to the harness's store, or None."""
        store = self.harness.open_handle()
        if not StoreCapabilities.of(store).has(self.requires):
            return f"{type(store).__name__} is not a {self.requires.__name__}"
        return self._needs(self.harness)

    async def run(self) -> None:
        """Run the check; a check that does not apply raises `RuntimeError` saying why."""
        why = self.skipped()
        if why is not None:
            raise RuntimeError(f"check {self.name!r} does not apply: {why}")
        await self._body(self.harness)


def _always(harness: StoreHarness) -> str | None:
    return None


def _manual_lease_clock(harness: StoreHarness) -> str | None:
    return None if harness.lease_clock is not None else "needs a lease clock to move by hand"


def _hypothesis(harness: StoreHarness) -> str | None:
    try:
        import hypothesis  # noqa: F401
    except ImportError:
        return "needs hypothesis"
    return _manual_lease_clock(harness)


_CHECKS: list[tuple[str, type, Body, Callable[[StoreHarness], str | None]]] = []


def _check(
    requires: type, needs: Callable[[StoreHarness], str | None] = _always
) -> Callable[[Body], Body]:
    def register(body: Body) -> Body:
        _CHECKS.append((body.__name__.lstrip("_"), requires, body, needs))
        return body

    return register


# --- helpers that do what pytest would ---


@contextmanager
def _raises(kind: type[_E], match: str | None = None) -> Iterator[list[_E]]:
    caught: list[_E] = []
    try:
        yield caught
    except kind as exc:
        if match is not None and not re.search(match, str(exc)):
            raise AssertionError(f"{exc!r} does not match {match!r}") from exc
        caught.append(exc)
    else:
        raise AssertionError(f"{kind.__name__} was not raised")


def _near(actual: float, expected: float, within: float) -> bool:
    return math.isclose(actual, expected, abs_tol=within)


async def _open(harness: StoreHarness) -> SessionStore:
    store = harness.open_handle()
    await store.__aenter__()
    return store


async def _checkpoint(store: SessionStore, name: str, session_id: str | None = None) -> None:
    await store.checkpoint_session(name, backend="claude", session_id=session_id, cwd=None)


async def _loaded(store: SessionStore, name: str) -> SessionRecord:
    record = await store.load(name)
    assert record is not None, f"no record of {name!r}"
    return record


def _owner(node: str, pid: int) -> LeaseOwner:
    return LeaseOwner(node=node, pid=pid, start_time=7, runtime_id=f"{node}:{pid}:7:x")


_A, _B = _owner("host-a", 4242), _owner("host-b", 5151)


async def _closing(*stores: SessionStore) -> None:
    for store in stores:
        await store.aclose()


def _workspace(name: str, branch: str, base: str | None = None) -> StoredWorkspace:
    return StoredWorkspace(
        name=name,
        repo="/srv/repo",
        path=f"/srv/repo.worktrees/{name}",
        branch=branch,
        base=base,
        node="host-a",
    )


def _turn(name: str, n: int = 1, **changes: Any) -> StoredTurn:
    turn = StoredTurn(
        name=name,
        node="host-a",
        started_at=1000.0 + n,
        ended_at=1000.5 + n,
        duration=0.5,
        outcome="complete",
        cost_usd=0.01 * n,
        usage=Usage(input_tokens=n, output_tokens=2 * n),
        prompt=f"prompt {n}",
        answer=f"answer {n}",
    )
    return attrs.evolve(turn, **changes)

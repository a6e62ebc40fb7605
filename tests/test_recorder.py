"""`Recorder`, the unit: what one agent's turns write to the store, on a MemoryStore whose
writes are counted (and, where a test says so, cancelled after they reached the store).
The last tests count the writes of a warm agent's turns through the public API, on the
fake CLI's live mode."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trio
from proc_helpers import wait_until
from trio.testing import MockClock

import agentrt
from agentrt import MemoryStore, Runtime, StopReason, StoreError, TurnFailed
from agentrt._mailbox import Mailbox
from agentrt._options import AgentOptions
from agentrt._recorder import Recorder
from agentrt._slot import Slot
from agentrt.store import StoreCapabilities
from agentrt.testing import fake_cli_executable

STATE = b'{"n":1}'
# When a turn started (wall clock) and how long it took, as the actor passes them.
ENDED = {"prompt": "fix the bug", "started_at": 5000.0, "duration": 2.5}


class CountingStore(MemoryStore):
    """Counts its writes; ``hang_after`` names a write that blocks once it has been made
    (its caller is cancelled with the write in the store), ``fail`` one that raises."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: Counter[str] = Counter()
        self.hang_after: str | None = None
        self.fail: str | None = None

    async def _write(self, method: str, *args: Any, **kwargs: Any) -> None:
        self.writes[method] += 1
        if self.fail == method:
            raise StoreError("counting", f"{method} refused")
        await getattr(super(), method)(*args, **kwargs)
        if self.hang_after == method:
            await trio.sleep_forever()

    async def checkpoint_session(self, *args: Any, **kwargs: Any) -> None:
        await self._write("checkpoint_session", *args, **kwargs)

    async def save_state(self, *args: Any, **kwargs: Any) -> None:
        await self._write("save_state", *args, **kwargs)

    async def record_turn(self, *args: Any, **kwargs: Any) -> None:
        await self._write("record_turn", *args, **kwargs)

    async def record_turn_with_history(self, *args: Any, **kwargs: Any) -> None:
        await self._write("record_turn_with_history", *args, **kwargs)

    async def set_live_process(self, *args: Any, **kwargs: Any) -> None:
        await self._write("set_live_process", *args, **kwargs)

    async def set_live_idle(self, *args: Any, **kwargs: Any) -> None:
        await self._write("set_live_idle", *args, **kwargs)

    async def clear_live_process(self, *args: Any, **kwargs: Any) -> None:
        await self._write("clear_live_process", *args, **kwargs)


@pytest.fixture
async def store() -> AsyncIterator[CountingStore]:
    async with CountingStore() as opened:
        yield opened


async def recorder(
    store: CountingStore, *, unclaimed: bool = True, keep_turns: int = 1000
) -> Recorder:
    """The recorder of agent "a", whose row is there already unless ``unclaimed`` (as
    ``start_agent`` leaves it)."""
    mailbox = Mailbox("a", AgentOptions(), itertools.count().__next__)
    slot = Slot(mailbox, store, "scripted", "/work", state_blob=STATE, unclaimed=unclaimed)
    if not unclaimed:
        await store.checkpoint_session("a", backend="scripted", session_id=None, cwd="/work")
        store.writes.clear()
    history = StoreCapabilities.of(store).turn_history
    return Recorder(slot, store, "runtime-1", "node-1", keep_turns, history)


async def spawn(rec: Recorder, pid: int = 4242) -> None:
    await rec.spawned(pid, pid, 777, "marker-1")


async def test_a_turn_claims_the_row_once_with_the_state(store: CountingStore) -> None:
    rec = await recorder(store)
    assert await store.load("a") is None  # nothing is written before a turn starts
    await rec.started()
    await spawn(rec)  # the turn's CLI: the turn has started already
    await rec.checkpoint("s-1")
    await rec.started()  # the next turn
    assert store.writes == {"checkpoint_session": 2, "save_state": 1, "set_live_process": 1}
    record = await store.load("a")
    assert record is not None
    assert (record.backend, record.cwd, record.session_id) == ("scripted", "/work", "s-1")
    assert record.state == STATE


async def test_a_spawn_claims_the_row_of_a_turn_that_did_not_say_it_started(
    store: CountingStore,
) -> None:
    rec = await recorder(store)
    await spawn(rec)
    await spawn(rec, 4343)  # a second process in the same turn (a warm CLI's retry)
    assert store.writes == {"checkpoint_session": 1, "save_state": 1, "set_live_process": 2}
    [record] = await store.live_processes()
    assert (record.live_pid, record.runtime_id, record.live_marker) == (
        4343,
        "runtime-1",
        "marker-1",
    )
    assert rec.slot.cli_pid == 4343


async def test_the_live_record_is_cleared_even_after_a_cancelled_write(
    store: CountingStore, autojump_clock: MockClock
) -> None:
    rec = await recorder(store, unclaimed=False)
    store.hang_after = "set_live_process"
    with trio.move_on_after(1):  # the caller is cancelled; the write has reached the store
        await spawn(rec)
    assert [r.live_pid for r in await store.live_processes()] == [4242]
    store.hang_after = None
    with trio.CancelScope() as scope:
        scope.cancel()  # the record goes also after a stop
        await rec.gone()
    assert await store.live_processes() == ()
    assert rec.slot.cli_pid is None
    assert store.writes["clear_live_process"] == 1


async def test_the_idle_flag_and_the_clear_write_only_what_changes(store: CountingStore) -> None:
    rec = await recorder(store, unclaimed=False)
    await rec.idle(False)
    await rec.idle(True)  # no live process: no record to mark
    await rec.gone()
    assert store.writes == {}
    await spawn(rec)  # recorded as running a turn
    await rec.idle(False)
    await rec.idle(True)
    await rec.idle(True)
    [record] = await store.live_processes()
    assert record.live_idle is True
    await rec.idle(False)
    await rec.gone()
    await rec.gone()
    await rec.idle(True)
    assert store.writes == {"set_live_process": 1, "set_live_idle": 2, "clear_live_process": 1}
    assert await store.live_processes() == ()


async def test_a_turn_is_counted_in_the_totals_and_recorded_once_it_started(
    store: CountingStore,
) -> None:
    rec = await recorder(store)
    failed = TurnFailed(StopReason.SPAWN_FAILED, "no such binary", cost_usd=0.5)
    await rec.turn_ended(failed, **ENDED)  # never started: only the session's totals count it
    assert store.writes == {}
    assert rec.slot.session_totals.cost_usd == 0.5
    await rec.started()
    await rec.turn_ended(TurnFailed(StopReason.INTERRUPTED, cost_usd=0.25), **ENDED)
    record = await store.load("a")
    assert record is not None
    assert (record.turns, record.cost_usd, record.last_stop_reason) == (1, 0.25, "interrupted")
    assert rec.slot.session_totals.cost_usd == 0.75


async def test_a_recorded_turn_has_its_entry_in_the_history_unless_it_keeps_none(
    store: CountingStore,
) -> None:
    rec = await recorder(store, unclaimed=False)
    await rec.turn_ended(TurnFailed(StopReason.INTERRUPTED, cost_usd=0.25), **ENDED)
    [entry] = await store.turn_history("a", limit=10)
    assert (entry.node, entry.outcome, entry.cost_usd) == ("node-1", "interrupted", 0.25)
    assert (entry.started_at, entry.ended_at, entry.duration) == (5000.0, 5002.5, 2.5)
    assert (entry.prompt, entry.answer) == ("fix the bug", None)  # a failed turn: no answer
    assert store.writes == {"record_turn_with_history": 1}  # the count, with the entry
    async with CountingStore() as other:
        none = await recorder(other, unclaimed=False, keep_turns=0)
        await none.turn_ended(TurnFailed(StopReason.INTERRUPTED), **ENDED)
        assert await other.turn_history("a", limit=10) == ()
        record = await other.load("a")
        assert record is not None and record.turns == 1


async def test_state_is_written_when_it_changes_and_with_the_claim_before(
    store: CountingStore,
) -> None:
    rec = await recorder(store)
    await rec.save_state(b'{"n":2}')  # unclaimed: kept for the claim
    assert store.writes == {}
    await rec.started()
    await rec.save_state(b'{"n":2}')  # unchanged
    await rec.save_state(None)
    assert store.writes == {"checkpoint_session": 1, "save_state": 2}
    record = await store.load("a")
    assert record is not None and record.state is None


async def test_a_checkpoint_the_store_refuses_raises_and_other_writes_do_not(
    store: CountingStore, caplog: pytest.LogCaptureFixture
) -> None:
    rec = await recorder(store, unclaimed=False)
    store.fail = "checkpoint_session"
    with pytest.raises(StoreError):
        await rec.checkpoint("s-1")
    assert rec.slot.session_id == "s-1"  # the next turn resumes it all the same
    assert "could not keep session s-1" in caplog.text
    writes = ("set_live_process", "set_live_idle", "record_turn_with_history", "clear_live_process")
    for method in writes:
        store.fail = method
        await spawn(rec)
        await rec.idle(True)
        await rec.turn_ended(TurnFailed(StopReason.INTERRUPTED), **ENDED)
        await rec.gone()
    assert caplog.text.count("the session store could not") == 5


async def test_an_idle_is_put_off_while_the_next_turn_is_queued(store: CountingStore) -> None:
    rec = await recorder(store, unclaimed=False)
    mailbox = rec.slot.mailbox
    await spawn(rec)
    mailbox.chain("next")  # the agent's next turn waits already
    await rec.idle(True)
    await rec.idle(False)  # ... and takes the CLI: the record never said it idled
    assert mailbox.take() is not None
    assert store.writes == {"set_live_process": 1}
    mailbox.chain("next")
    await rec.idle(True)
    assert rec.idle_due
    assert mailbox.take() is not None  # taken, but the agent parks (say it halted first)
    await rec.parked()
    await rec.parked()
    [record] = await store.live_processes()
    assert record.live_idle is True and not rec.idle_due
    assert store.writes == {"set_live_process": 1, "set_live_idle": 1}


async def start_warm(rt: Runtime, tmp_path: Path) -> None:
    binary = fake_cli_executable(str(tmp_path), ["live", {"session_id": "s-1"}], name="claude")
    options: dict[str, Any] = {"kill_grace": 0.3, "startup": 10, "watchdog": 30, "keep_alive": 30}
    await rt.start_agent(agentrt.Agent, name="a", backend="claude", binary=binary, **options)


async def live_idle(store: MemoryStore) -> bool:
    [record] = await store.live_processes()
    return record.live_idle


async def test_a_warm_agent_marks_its_cli_idle_once_its_queued_turns_are_done(
    tmp_path: Path,
) -> None:
    store = CountingStore()
    async with agentrt.open_runtime(store=store) as rt:
        await start_warm(rt, tmp_path)
        await rt.ask("a", "one")
        assert await live_idle(store) is True
        store.writes.clear()
        refs = [await rt.tell("a", prompt) for prompt in ("two", "three", "four")]
        for ref in refs:
            await rt.wait(ref)
        assert await live_idle(store) is True
        # Not idle while two and three ran, idle after four: no flag flipped between.
        assert store.writes == {"set_live_idle": 2, "record_turn_with_history": 3}


async def test_a_warm_agent_whose_queued_turn_waits_marks_its_cli_idle(tmp_path: Path) -> None:
    store = CountingStore()
    async with agentrt.open_runtime(store=store) as rt:
        await start_warm(rt, tmp_path)
        await rt.ask("a", "one")
        store.writes.clear()
        two = await rt.tell("a", "two")
        three = await rt.tell("a", "three")
        await rt.halt("a")  # after the running turn: three waits in the queue
        await rt.wait(two)
        await wait_until(lambda: store.writes["set_live_idle"] == 2)
        assert await live_idle(store) is True
        assert (await rt.status("a")).state == "halted"
        await rt.unhalt("a")
        await rt.wait(three)
        assert await live_idle(store) is True

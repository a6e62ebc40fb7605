"""Conformance checks every store passes: session rows, totals, redaction, closing and
reopening, concurrent writers.
"""

from __future__ import annotations

from typing import Any

import trio

from .._errors import StoreError
from .._events import SessionTotals, StopReason, Usage
from .._records import (
    SessionRecord,
)
from .._stores._protocols import (
    SessionStore,
    StoreCapabilities,
)
from ._conformance_kit import (
    StoreHarness,
    _check,
    _checkpoint,
    _loaded,
    _open,
    _raises,
)

# --- the core: every store ---


@_check(SessionStore)
async def _an_empty_store_has_no_records(harness: StoreHarness) -> None:
    store = await _open(harness)
    try:
        assert await store.load("coder") is None
        assert list(await store.list()) == []
        live = StoreCapabilities.of(store).live
        if live is not None:
            assert list(await live.live_processes()) == []
        assert await store.forget("coder") is False
    finally:
        await store.aclose()


@_check(SessionStore)
async def _checkpoint_creates_a_row_with_zero_totals(harness: StoreHarness) -> None:
    store = await _open(harness)
    try:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd="/repo")
        record = await _loaded(store, "coder")
        created = record.created_at if harness.clock is None else harness.clock.now
        assert record == SessionRecord(
            name="coder",
            backend="claude",
            session_id="s-1",
            cwd="/repo",
            turns=0,
            cost_usd=0.0,
            usage=Usage(),
            last_stop_reason=None,
            created_at=created,
            updated_at=created,
            live_pgid=None,
            live_pid=None,
            live_start_time=None,
            runtime_id=None,
            state=None,
        )
    finally:
        await store.aclose()


@_check(SessionStore)
async def _checkpoint_again_updates_identity_and_keeps_totals(harness: StoreHarness) -> None:
    store = await _open(harness)
    try:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd="/repo")
        await store.record_turn(
            "coder",
            stop_reason="complete",
            cost_usd=0.25,
            usage=Usage(input_tokens=5),
            session_id=None,
        )
        await store.save_state("coder", b"state")
        first = await _loaded(store, "coder")
        if harness.clock is not None:
            harness.clock.advance(1000.0)
        await store.checkpoint_session("coder", backend="codex", session_id="s-2", cwd=None)
        record = await _loaded(store, "coder")
        assert (record.backend, record.session_id, record.cwd) == ("codex", "s-2", None)
        assert (record.turns, record.cost_usd, record.usage) == (1, 0.25, Usage(input_tokens=5))
        assert record.state == b"state"
        assert record.created_at == first.created_at
        if harness.clock is not None:
            assert record.updated_at == first.created_at + 1000.0
        # A fresh start or a reset: no conversation, the rest stays.
        await store.checkpoint_session("coder", backend="codex", session_id=None, cwd=None)
        record = await _loaded(store, "coder")
        assert record.session_id is None
        assert record.turns == 1
    finally:
        await store.aclose()


@_check(SessionStore)
async def _session_totals_sum_one_session_and_restart_with_a_new_id(
    harness: StoreHarness,
) -> None:
    store = await _open(harness)
    try:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd="/r")
        for cost in (0.25, 0.5):
            await store.record_turn(
                "coder",
                stop_reason="complete",
                cost_usd=cost,
                usage=Usage(output_tokens=2),
                session_id="s-1",
            )
        # The same id again (a restart resuming it) keeps the session's totals.
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd="/r")
        record = await _loaded(store, "coder")
        assert record.session_totals == SessionTotals(
            usage=Usage(output_tokens=4), cost_usd=0.75, turns=2
        )
        # A new session (or none, after a reset) starts from zero; the agent's totals go on.
        await store.checkpoint_session("coder", backend="claude", session_id="s-2", cwd="/r")
        await store.record_turn(
            "coder", stop_reason="complete", cost_usd=1.0, usage=None, session_id="s-2"
        )
        record = await _loaded(store, "coder")
        assert record.session_totals == SessionTotals(cost_usd=1.0, turns=1)
        assert (record.cost_usd, record.turns) == (1.75, 3)
        await store.checkpoint_session("coder", backend="claude", session_id=None, cwd="/r")
        record = await _loaded(store, "coder")
        assert record.session_totals == SessionTotals()
    finally:
        await store.aclose()


@_check(SessionStore)
async def _record_turn_accumulates_cost_usage_and_keeps_last_reason(
    harness: StoreHarness,
) -> None:
    store = await _open(harness)
    clock = harness.clock
    try:
        await store.checkpoint_session("coder", backend="claude", session_id="s-1", cwd="/repo")
        created = (await _loaded(store, "coder")).created_at
        turns: list[tuple[Any, float | None, Usage | None, str | None]] = [
            (
                StopReason.COMPLETE,
                0.5,
                Usage(
                    input_tokens=10,
                    output_tokens=20,
                    cache_creation_input_tokens=30,
                    cache_read_input_tokens=40,
                ),
                "s-1",
            ),
            (StopReason.TOTAL_TIMEOUT, None, None, None),
            ("complete", 0.125, Usage(input_tokens=1, output_tokens=2), "s-9"),
        ]
        for stop_reason, cost, usage, session_id in turns:
            if clock is not None:
                clock.advance(1.0)
            await store.record_turn(
                "coder",
                stop_reason=stop_reason,
                cost_usd=cost,
                usage=usage,
                session_id=session_id,
            )
        record = await _loaded(store, "coder")
        assert record.turns == 3
        assert record.cost_usd == 0.625
        assert record.usage == Usage(
            input_tokens=11,
            output_tokens=22,
            cache_creation_input_tokens=30,
            cache_read_input_tokens=40,
        )
        assert record.last_stop_reason == "complete"
        assert record.session_id == "s-9"
        assert record.created_at == created
        if clock is not None:
            assert record.updated_at == created + 3.0
    finally:
        await store.aclose()


@_check(SessionStore)
async def _a_stop_reason_is_kept_as_its_plain_value(harness: StoreHarness) -> None:
    store = await _open(harness)
    try:
        await _checkpoint(store, "coder")
        await store.record_turn(
            "coder",
            stop_reason=StopReason.TOTAL_TIMEOUT,
            cost_usd=None,
            usage=None,
            session_id=None,
        )
        record = await _loaded(store, "coder")
        assert type(record.last_stop_reason) is str
        assert record.last_stop_reason == "total_timeout"
    finally:
        await store.aclose()


@_check(SessionStore)
async def _stored_text_is_redacted(harness: StoreHarness) -> None:
    store = await _open(harness)
    try:
        await _checkpoint(store, "coder")
        secret = "sk-ant-api03-abcdefghijklmnop"
        await store.record_turn(
            "coder",
            stop_reason=f"cli_error: Authorization: Bearer {secret}",
            cost_usd=None,
            usage=None,
            session_id=None,
        )
        reason = (await _loaded(store, "coder")).last_stop_reason
        assert reason is not None
        assert secret not in reason
        assert reason.startswith("cli_error: ")
        assert "[REDACTED]" in reason
    finally:
        await store.aclose()


@_check(SessionStore)
async def _writes_without_a_row_are_refused_naming_the_agent(harness: StoreHarness) -> None:
    store = await _open(harness)
    try:
        with _raises(StoreError, match="'ghost'"):
            await store.record_turn(
                "ghost", stop_reason="complete", cost_usd=1.0, usage=None, session_id=None
            )
        with _raises(StoreError, match="'ghost'"):
            await store.save_state("ghost", b"x")
        live = StoreCapabilities.of(store).live
        if live is not None:
            with _raises(StoreError, match="'ghost'"):
                await live.set_live_process("ghost", pgid=1, pid=1, start_time=1, runtime_id="r")
            await live.clear_live_process("ghost")  # cleanup of nothing is fine
        assert await store.load("ghost") is None
    finally:
        await store.aclose()


@_check(SessionStore)
async def _state_blob_round_trips_and_can_be_dropped(harness: StoreHarness) -> None:
    store = await _open(harness)
    try:
        await _checkpoint(store, "coder")
        blob = bytes(range(256)) * 4096  # 1 MiB, every byte value
        for state in (blob, b"", None):
            await store.save_state("coder", state)
            assert (await _loaded(store, "coder")).state == state
    finally:
        await store.aclose()


@_check(SessionStore)
async def _forget_removes_one_row_and_list_is_by_name(harness: StoreHarness) -> None:
    store = await _open(harness)
    try:
        for name in ("zeta", "alpha", "mid"):
            await _checkpoint(store, name, f"s-{name}")
        assert [r.name for r in await store.list()] == ["alpha", "mid", "zeta"]
        assert await store.forget("mid") is True
        assert await store.forget("mid") is False
        assert await store.load("mid") is None
        records = await store.list()
        assert [(r.name, r.session_id) for r in records] == [
            ("alpha", "s-alpha"),
            ("zeta", "s-zeta"),
        ]
    finally:
        await store.aclose()


@_check(SessionStore)
async def _a_closed_store_refuses_calls_and_reopens_with_its_records(
    harness: StoreHarness,
) -> None:
    store = await _open(harness)
    try:
        await _checkpoint(store, "coder", "s-1")
        with _raises(StoreError, match="already open"):
            async with store:
                pass
        await store.aclose()
        await store.aclose()  # idempotent
        with _raises(StoreError, match="not open"):
            await store.load("coder")
        with _raises(StoreError, match="not open"):
            await _checkpoint(store, "x")
        async with store:
            assert (await _loaded(store, "coder")).session_id == "s-1"
    finally:
        await store.aclose()  # once more: allowed


@_check(SessionStore)
async def _concurrent_writers_from_many_tasks_are_all_kept(harness: StoreHarness) -> None:
    store = await _open(harness)
    live = StoreCapabilities.of(store).live
    try:
        await _checkpoint(store, "shared")

        async def worker(i: int) -> None:
            name = f"agent-{i:03d}"
            await _checkpoint(store, name, f"s-{i}")
            await store.record_turn(
                "shared",
                stop_reason="complete",
                cost_usd=0.25,
                usage=Usage(input_tokens=i),
                session_id=None,
            )
            if live is not None:
                await live.set_live_process(name, pgid=i, pid=i, start_time=i, runtime_id="rt")
            mine = await _loaded(store, name)  # each task reads its own writes
            assert mine.session_id == f"s-{i}"
            assert live is None or mine.live_pgid == i

        n = 60
        async with trio.open_nursery() as nursery:
            for i in range(n):
                nursery.start_soon(worker, i)
        shared = await _loaded(store, "shared")
        assert shared.turns == n
        assert shared.cost_usd == 0.25 * n
        assert shared.usage.input_tokens == sum(range(n))
        assert len(await store.list()) == n + 1
        if live is not None:
            assert [r.live_pgid for r in await live.live_processes()] == list(range(n))
    finally:
        await store.aclose()

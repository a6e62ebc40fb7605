"""Conformance checks of what a store keeps beside sessions: failover specs, budgets,
credentials' parks and halts, portable transcripts, workspaces, approvals waiting for a
person, the turn history.
"""

from __future__ import annotations

import time

import attrs
import trio

from .._errors import BranchInUse, StoreError
from .._events import Usage
from .._records import (
    OperatorDecision,
    PendingApproval,
    StoredBudget,
    StoredCredential,
)
from .._stores._protocols import (
    ApprovalStore,
    BudgetStore,
    CredentialStore,
    SpecStore,
    StoreCapabilities,
    TranscriptStore,
    TurnHistoryStore,
    WorkspaceStore,
)
from ._conformance_kit import (
    StoreHarness,
    _check,
    _checkpoint,
    _closing,
    _loaded,
    _near,
    _open,
    _raises,
    _turn,
    _workspace,
)

# --- failover specs ---


@_check(SpecStore)
async def _specs_keep_their_start_order_and_go_with_forget(harness: StoreHarness) -> None:
    store = await _open(harness)
    kept = StoreCapabilities.of(store).specs
    assert kept is not None
    try:
        assert list(await kept.specs()) == []
        for name in ("zeta", "alpha", "mid"):
            await kept.save_spec(name, f'{{"v": "{name}"}}')  # needs no session row
        await kept.save_spec("zeta", '{"v": 2}')  # replaced, keeps its place
        assert list(await kept.specs()) == [
            ("zeta", '{"v": 2}'),
            ("alpha", '{"v": "alpha"}'),
            ("mid", '{"v": "mid"}'),
        ]
        await kept.save_spec("alpha", None)
        await _checkpoint(store, "mid")
        await store.forget("mid")  # the row and its spec
        assert list(await kept.specs()) == [("zeta", '{"v": 2}')]
    finally:
        await _closing(store)


# --- budgets ---


@_check(BudgetStore)
async def _budgets_keep_their_order_and_limits_and_outlive_a_reopen(
    harness: StoreHarness,
) -> None:
    own = StoredBudget(scope="agent 'zeta'", key="k-own", usd=0.5, tokens=None)
    supervisor = StoredBudget(scope="supervisor", key="k-sup", usd=None, tokens=12_000_000_000)
    runtime = StoredBudget(scope="runtime", key="k-rt", usd=1.4, tokens=900)
    store = await _open(harness)
    kept = StoreCapabilities.of(store).budgets
    assert kept is not None
    try:
        assert list(await kept.budgets()) == []
        await kept.save_budgets("zeta", (runtime,))  # needs no session row
        await kept.save_budgets("zeta", (own, supervisor, runtime))  # replaced, in order
        await kept.save_budgets("alpha", (runtime,))
        await kept.save_budgets("mid", (supervisor,))
        await kept.save_budgets("mid", ())  # none: dropped
    finally:
        await _closing(store)
    store = await _open(harness)
    kept = StoreCapabilities.of(store).budgets
    assert kept is not None
    try:
        assert list(await kept.budgets()) == [
            ("alpha", (runtime,)),
            ("zeta", (own, supervisor, runtime)),
        ]
    finally:
        await _closing(store)


# --- credentials' parks and halts ---


@_check(CredentialStore)
async def _a_credentials_park_and_halt_are_shared_replaced_and_outlive_a_reopen(
    harness: StoreHarness,
) -> None:
    parked = StoredCredential(
        key="named:team", label="team", parked_until=1e10, park_reason="usage limit met"
    )
    halted = StoredCredential(
        key="claude:/l/.claude/.credentials.json",
        label="claude login file /l/.claude/.credentials.json",
        halt_reason="credential_expired: log the CLI in again",
        halted_since=1_700_000_000.5,
    )
    store, other = await _open(harness), await _open(harness)
    kept, seen = StoreCapabilities.of(store).credentials, StoreCapabilities.of(other).credentials
    assert kept is not None and seen is not None
    try:
        assert list(await kept.credentials()) == []
        assert await kept.credential("named:team") is None
        await kept.save_credential(attrs.evolve(parked, parked_until=5.0, agents=("ignored",)))
        await kept.save_credential(parked)  # replaced; needs no session row
        await kept.save_credential(halted)
        for name in ("b", "a", "c"):
            await kept.use_credential(name, parked.key)
        await kept.use_credential("c", halted.key)  # an agent uses one credential
        # Whether the halt and the park hold an agent is kept with it, and replaced.
        await kept.use_credential("d", halted.key, halts=False, parks=False)
        await kept.use_credential("d", halted.key, halts=False)
        await kept.use_credential("e", parked.key, parks=False)
        # Another handle (another program) reads what this one stored.
        assert await seen.credential(parked.key) == parked
        assert list(await seen.credentials()) == [
            attrs.evolve(halted, agents=("c", "d"), ignore_halt=("d",)),
            attrs.evolve(parked, agents=("a", "b", "e"), ignore_park=("e",)),
        ]
        renewed = attrs.evolve(halted, halt_reason=None, halted_since=None)
        await seen.save_credential(renewed)
        assert await kept.credential(halted.key) == renewed
    finally:
        await _closing(other)
        await _closing(store)
    store = await _open(harness)
    kept = StoreCapabilities.of(store).credentials
    assert kept is not None
    try:
        assert [c.key for c in await kept.credentials()] == [halted.key, parked.key]
        assert await kept.credential(parked.key) == parked
    finally:
        await _closing(store)


# --- portable transcripts ---


@_check(TranscriptStore)
async def _a_transcript_grows_by_chunks_and_a_stale_one_writes_nothing(
    harness: StoreHarness,
) -> None:
    store = await _open(harness)
    kept = StoreCapabilities.of(store).transcripts
    assert kept is not None
    try:
        assert await kept.load_transcript("coder") is None
        path = "projects/w/s1.jsonl"
        await kept.append_transcript("coder", session_id="s1", path=path, offset=0, data=b"ab")
        await kept.append_transcript("coder", session_id="s1", path=path, offset=2, data=b"cd")
        with _raises(StoreError, match="'coder'"):  # not where the stored one ends
            await kept.append_transcript("coder", session_id="s1", path=path, offset=3, data=b"x")
        with _raises(StoreError):  # another session, not from the start
            await kept.append_transcript("coder", session_id="s2", path=path, offset=4, data=b"x")
        stored = await kept.load_transcript("coder")
        assert stored is not None
        assert (stored.session_id, stored.path, stored.data) == ("s1", path, b"abcd")
        await kept.append_transcript("coder", session_id="s2", path="t2", offset=0, data=b"new")
        stored = await kept.load_transcript("coder")
        assert stored is not None and (stored.session_id, stored.data) == ("s2", b"new")
        with _raises(ValueError):
            await kept.append_transcript("coder", session_id="s2", path="../x", offset=0, data=b"")
        assert await kept.load_transcript("other") is None
    finally:
        await _closing(store)


# --- workspaces ---


@_check(WorkspaceStore)
async def _a_workspace_is_kept_by_name_replaced_and_outlives_forget(
    harness: StoreHarness,
) -> None:
    store = await _open(harness)
    kept = StoreCapabilities.of(store).workspaces
    assert kept is not None
    try:
        assert list(await kept.workspaces()) == []
        coder = _workspace("coder", "agentrt/coder", base="main")
        await kept.save_workspace(coder)  # needs no session row
        await kept.save_workspace(_workspace("alpha", "agentrt/alpha"))
        assert list(await kept.workspaces()) == [_workspace("alpha", "agentrt/alpha"), coder]
        moved = attrs.evolve(coder, path="/elsewhere", node="host-b")
        await kept.save_workspace(moved)
        await _checkpoint(store, "coder")
        await store.forget("coder")  # the session row only: the worktree may hold work
        assert [w for w in await kept.workspaces() if w.name == "coder"] == [moved]
        assert await kept.drop_workspace("coder") is True
        assert await kept.drop_workspace("coder") is False
        assert [w.name for w in await kept.workspaces()] == ["alpha"]
    finally:
        await _closing(store)


@_check(WorkspaceStore)
async def _a_branch_is_one_agents_whichever_handles_race_for_it(harness: StoreHarness) -> None:
    one, two = await _open(harness), await _open(harness)
    one_kept = StoreCapabilities.of(one).workspaces
    two_kept = StoreCapabilities.of(two).workspaces
    assert one_kept is not None and two_kept is not None
    try:
        coder = _workspace("coder", "agentrt/shared")
        await one_kept.save_workspace(coder)
        with _raises(BranchInUse) as taken:
            await two_kept.save_workspace(_workspace("other", "agentrt/shared"))
        assert (taken[0].repo, taken[0].branch) == ("/srv/repo", "agentrt/shared")
        assert taken[0].holder == "agent 'coder'"
        await one_kept.save_workspace(attrs.evolve(coder, node="host-b"))  # its own: replaced
        elsewhere = attrs.evolve(_workspace("other", "agentrt/shared"), repo="/srv/other")
        await two_kept.save_workspace(elsewhere)  # the same name in another repository
        # Saves racing for one branch from two handles (two programs, or two hosts): the
        # check and the write are one step, so exactly one is stored.
        for round in range(5):
            branch = f"race/{round}"
            stored = await _racing_saves(
                branch, [(f"r{round}-{i}", s) for i, s in enumerate([one_kept, two_kept] * 3)]
            )
            assert len(stored) == 1, stored
            assert [w.name for w in await two_kept.workspaces() if w.branch == branch] == stored
    finally:
        await _closing(one, two)


async def _racing_saves(branch: str, savers: list[tuple[str, WorkspaceStore]]) -> list[str]:
    """Save a workspace on ``branch`` for each (name, handle) at once; the names stored."""
    stored: list[str] = []

    async def save(name: str, store: WorkspaceStore) -> None:
        try:
            await store.save_workspace(_workspace(name, branch))
        except BranchInUse:
            return
        stored.append(name)

    async with trio.open_nursery() as nursery:
        for name, store in savers:
            nursery.start_soon(save, name, store)
    return stored


# --- approvals waiting for a person: decided exactly once, from any handle ---


def _approval(
    id: str, requested_at: float = 1000.0, *, harness: StoreHarness, bound: float = 60.0
) -> PendingApproval:
    # Its times count from the harness's clock (1000.0 is its start): a request is pending
    # only until its bound passes.
    now = time.time() if harness.clock is None else harness.clock()
    requested_at += now - 1000.0
    return PendingApproval(
        id=id,
        name="coder",
        tool_name="Bash",
        tool_use_id=f"toolu_{id}",
        input='{"command": "ls"}',
        reason="shell",
        runtime_id="r-1",
        request=3,
        requested_at=requested_at,
        expires_at=requested_at + bound,
    )


_BY_CONSOLE = OperatorDecision(
    allowed=True, updated_input='{"command": "ls -l"}', decided_by="console"
)


@_check(ApprovalStore)
async def _an_approval_is_decided_once_and_removed_with_its_decision(
    harness: StoreHarness,
) -> None:
    store = await _open(harness)
    desk = StoreCapabilities.of(store).approvals
    assert desk is not None
    try:
        assert list(await desk.pending_approvals()) == []
        first = _approval("a", harness=harness)
        await desk.put_approval(_approval("b", requested_at=1001.0, harness=harness))
        await desk.put_approval(first)
        assert [a.id for a in await desk.pending_approvals()] == ["a", "b"]  # oldest first
        assert (await desk.pending_approvals())[0] == first
        with _raises(StoreError, match="'a' exists"):
            await desk.put_approval(first)
        assert await desk.decision_of("a") is None
        assert await desk.decide_approval("a", _BY_CONSOLE)
        assert not await desk.decide_approval("a", OperatorDecision(allowed=False, decided_by="x"))
        assert await desk.decision_of("a") == _BY_CONSOLE
        assert [a.id for a in await desk.pending_approvals()] == ["b"]
        assert await desk.remove_approval("a") == _BY_CONSOLE
        assert await desk.remove_approval("a") is None
        assert await desk.decision_of("a") is None
        assert not await desk.decide_approval("a", _BY_CONSOLE)  # gone: refused
        denied = OperatorDecision(allowed=False, message="not here", decided_by="console")
        assert await desk.decide_approval("b", denied)
        assert await desk.remove_approval("b") == denied
        assert await desk.remove_approval("never") is None
        assert not await desk.decide_approval("never", denied)
    finally:
        await store.aclose()


@_check(ApprovalStore)
async def _concurrent_decisions_from_two_handles_decide_once(harness: StoreHarness) -> None:
    one, two = await _open(harness), await _open(harness)
    one_desk = StoreCapabilities.of(one).approvals
    two_desk = StoreCapabilities.of(two).approvals
    assert one_desk is not None and two_desk is not None
    try:
        await one_desk.put_approval(_approval("a", harness=harness))
        assert [a.id for a in await two_desk.pending_approvals()] == ["a"]
        won: list[str] = []

        async def decide(store: ApprovalStore, by: str) -> None:
            if await store.decide_approval("a", OperatorDecision(allowed=True, decided_by=by)):
                won.append(by)

        async with trio.open_nursery() as nursery:
            for i in range(8):
                nursery.start_soon(decide, one_desk if i % 2 else two_desk, f"console-{i}")
        assert len(won) == 1
        decided = await one_desk.remove_approval("a")
        assert decided is not None and decided.decided_by == won[0]
    finally:
        await _closing(one, two)


@_check(ApprovalStore)
async def _an_approval_past_its_bound_is_neither_pending_nor_decidable(
    harness: StoreHarness,
) -> None:
    # The row a program that died waiting leaves behind: nobody would read its decision.
    store = await _open(harness)
    desk = StoreCapabilities.of(store).approvals
    assert desk is not None
    try:
        await desk.put_approval(_approval("gone", requested_at=900.0, harness=harness))
        await desk.put_approval(_approval("live", harness=harness))
        assert [a.id for a in await desk.pending_approvals()] == ["live"]
        assert not await desk.decide_approval("gone", _BY_CONSOLE)
        assert await desk.decision_of("gone") is None
        assert await desk.decide_approval("live", _BY_CONSOLE)
        assert await desk.remove_approval("gone") is None
    finally:
        await store.aclose()


# --- the turn history ---


@_check(TurnHistoryStore)
async def _a_turn_with_history_is_counted_and_kept_newest_first_and_bounded(
    harness: StoreHarness,
) -> None:
    store = await _open(harness)
    history = StoreCapabilities.of(store).turn_history
    assert history is not None
    try:
        assert list(await history.turn_history(None, limit=10)) == []
        await _checkpoint(store, "a", "s-1")
        await _checkpoint(store, "b")
        for n in (1, 2, 3):
            await history.record_turn_with_history(_turn("a", n), session_id="s-1", keep=2)
        failed = _turn("b", 4, outcome="interrupted", cost_usd=None, answer=None)
        await history.record_turn_with_history(failed, session_id="s-2", keep=2)
        record = await _loaded(store, "a")
        assert (record.turns, record.last_stop_reason) == (3, "complete")
        assert _near(record.cost_usd, 0.06, 1e-9)
        assert record.usage == Usage(input_tokens=6, output_tokens=12)
        assert (await _loaded(store, "b")).session_id == "s-2"
        # The two newest of "a" stay; the first went out with the third.
        assert list(await history.turn_history("a", limit=10)) == [_turn("a", 3), _turn("a", 2)]
        assert [t.name for t in await history.turn_history(None, limit=10)] == ["b", "a", "a"]
        assert list(await history.turn_history(None, limit=1, offset=1)) == [_turn("a", 3)]
        assert list(await history.turn_history("b", limit=10)) == [failed]
        assert list(await history.turn_history("a", limit=0)) == []
        assert list(await history.turn_history("nobody", limit=10)) == []
        with _raises(StoreError, match="'c'"):  # no row: nothing is kept
            await history.record_turn_with_history(_turn("c"), session_id=None, keep=2)
        assert list(await history.turn_history("c", limit=10)) == []
        for bad in (0, -1):
            with _raises(ValueError, match="keep"):
                await history.record_turn_with_history(_turn("a"), session_id=None, keep=bad)
        with _raises(ValueError, match="offset"):
            await history.turn_history("a", limit=1, offset=-1)
        assert (await _loaded(store, "a")).turns == 3
        assert await store.forget("a")  # its history goes with its row
        assert [t.name for t in await history.turn_history(None, limit=10)] == ["b"]
        await _checkpoint(store, "d")
        for n in range(1, 5):  # fewer than it keeps: every one stays
            await history.record_turn_with_history(_turn("d", n), session_id=None, keep=5)
        assert [t.prompt for t in await history.turn_history("d", limit=10)] == [
            "prompt 4",
            "prompt 3",
            "prompt 2",
            "prompt 1",
        ]
    finally:
        await store.aclose()


@_check(TurnHistoryStore)
async def _a_turn_history_keeps_its_stop_reason_redacted_and_outlives_a_reopen(
    harness: StoreHarness,
) -> None:
    store = await _open(harness)
    history = StoreCapabilities.of(store).turn_history
    assert history is not None
    secret = "sk-ant-api03-" + "x" * 30
    try:
        await _checkpoint(store, "a")
        turn = _turn("a", outcome=f"custom failure {secret}")
        await history.record_turn_with_history(turn, session_id=None, keep=5)
    finally:
        await store.aclose()
    again = await _open(harness)
    again_history = StoreCapabilities.of(again).turn_history
    assert again_history is not None
    try:
        [kept] = await again_history.turn_history("a", limit=5)
        assert secret not in kept.outcome and kept.outcome.startswith("custom failure")
        assert kept == attrs.evolve(turn, outcome=kept.outcome)
        assert (await _loaded(again, "a")).last_stop_reason == kept.outcome
    finally:
        await again.aclose()

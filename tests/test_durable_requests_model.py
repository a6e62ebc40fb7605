"""Durable requests at the runtime, against a model of each agent's queue: Hypothesis plays
arbitrary interleavings of tell (with and without keys, duplicates among them), withdraw,
interrupt, a turn's answer, a wait, a clean close and a crash, each followed by a restart
on the same SQLite file, and checks that every accepted request ends exactly once with the
outcome the model says, runs in order per agent and never runs twice (once more after a
crash with ``on_owner_death="retry"``). The suite plays 50 examples a policy: each crash
with a turn running costs the dead owner's 3 s of trying to settle it, in real time (the
file is real SQLite). ``AGENTRT_MODEL_EXAMPLES=500`` plays a deeper run."""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from agentrt import (
    Agent,
    Completed,
    Failed,
    OwnerDied,
    Pending,
    Ref,
    Runtime,
    SQLiteStore,
    StoreError,
    TurnFailed,
    Withdrawn,
    open_runtime,
)
from agentrt.testing import Call, Gate, ScriptedBackend, reply

AGENTS = ("a", "b")
# A step bound, not a timing: a loaded machine fsyncs slowly.
STEP_BOUND = 30
EXAMPLES = int(os.environ.get("AGENTRT_MODEL_EXAMPLES", "50"))


class _CrashableStore(SQLiteStore):
    """An SQLite store whose owner can die between a turn and its settlement: once
    ``crashed``, it settles nothing, so the request stays running in the file, as it does
    when the program is killed mid-turn."""

    crashed = False

    async def settle_request(self, *args: Any, **kwargs: Any) -> Any:
        if self.crashed:
            await trio.lowlevel.checkpoint()
            raise StoreError("model", "the owner died")
        return await super().settle_request(*args, **kwargs)


class _Turns:
    """Each turn: the agent's session, then a gate the test releases, then the answer."""

    def __init__(self) -> None:
        self.gates: dict[str, list[Gate]] = {}
        self._made: dict[tuple[str, int], trio.Event] = {}

    def _event(self, prompt: str, run: int) -> trio.Event:
        return self._made.setdefault((prompt, run), trio.Event())

    def script(self, call: Call) -> list[object]:
        gate = Gate()
        runs = self.gates.setdefault(call.prompt, [])
        runs.append(gate)
        self._event(call.prompt, len(runs)).set()
        session = _session(call.prompt.split("-")[0])
        first, *rest = reply(f"answer {call.prompt}", session_id=session)
        return [first, gate, *rest]

    async def reached(self, prompt: str, run: int) -> None:
        await self._event(prompt, run).wait()
        await self.gates[prompt][run - 1].wait_reached()


def _session(agent: str) -> str:
    return f"s-{agent}"


@attrs.define
class _Req:
    agent: str
    prompt: str
    ref: Ref
    state: str = "queued"  # running, complete, withdrawn, interrupted, cancelled, owner_died
    runs: int = 0


@attrs.define
class _Owner:
    rt: Runtime
    store: _CrashableStore
    scope: trio.CancelScope
    done: trio.Event


class _Model:
    def __init__(self, nursery: trio.Nursery, path: Path, policy: str) -> None:
        self.nursery = nursery
        self.path = path
        self.policy = policy
        self.turns = _Turns()
        self.backends = {agent: ScriptedBackend(default=self.turns.script) for agent in AGENTS}
        self.queues: dict[str, list[_Req]] = {agent: [] for agent in AGENTS}
        self.keys: dict[tuple[str, str], _Req] = {}
        self.numbers = itertools.count()
        self.owner: _Owner | None = None

    @property
    def rt(self) -> Runtime:
        assert self.owner is not None
        return self.owner.rt

    async def open(self) -> None:
        self.owner = await self.nursery.start(self._own)

    async def _own(self, task_status: trio.TaskStatus[_Owner]) -> None:
        store = _CrashableStore(self.path)
        done = trio.Event()
        try:
            with trio.CancelScope() as scope:
                async with open_runtime(store=store) as rt:
                    for agent in AGENTS:
                        await rt.start_agent(
                            Agent,
                            name=agent,
                            backend=self.backends[agent],
                            on_owner_death=self.policy,
                        )
                    task_status.started(_Owner(rt, store, scope, done))
                    await trio.sleep_forever()
        finally:
            done.set()

    def head(self, agent: str) -> _Req | None:
        return next((r for r in self.queues[agent] if r.state in ("queued", "running")), None)

    async def settle(self) -> None:
        """Each agent runs the first request it has not ended: wait until its turn is at
        its gate, so that the next step meets a known state."""
        for agent in AGENTS:
            head = self.head(agent)
            if head is None:
                continue
            if head.state == "queued":
                head.state = "running"
                head.runs += 1
            with trio.fail_after(STEP_BOUND):
                await self.turns.reached(head.prompt, head.runs)

    async def step(self, op: tuple[Any, ...]) -> None:
        await getattr(self, op[0])(*op[1:])
        await self.settle()

    async def tell(self, agent: str, key: str | None) -> None:
        prompt = f"{agent}-{next(self.numbers)}"
        ref = await self.rt.tell(agent, prompt, key=key)
        if key is not None and (agent, key) in self.keys:
            assert ref == self.keys[agent, key].ref  # the first request's, nothing new
            return
        request = _Req(agent, prompt, ref)
        self.queues[agent].append(request)
        if key is not None:
            self.keys[agent, key] = request
            assert await self.rt.request(agent, key) == ref

    async def withdraw(self, agent: str, index: int) -> None:
        queue = self.queues[agent]
        if not queue:
            return
        request = queue[index % len(queue)]
        assert await self.rt.withdraw(request.ref) == (request.state == "queued")
        if request.state == "queued":
            request.state = "withdrawn"

    async def answer(self, agent: str) -> None:
        head = self.head(agent)
        if head is None:
            return
        self.turns.gates[head.prompt][head.runs - 1].release()
        head.state = "complete"
        with trio.fail_after(STEP_BOUND):
            self.check(head, await self.rt.wait(head.ref))

    async def interrupt(self, agent: str) -> None:
        head = self.head(agent)
        assert await self.rt.interrupt(agent) == (head is not None)
        if head is not None:
            head.state = "interrupted"
            with trio.fail_after(STEP_BOUND):
                self.check(head, await self.rt.wait(head.ref))

    async def wait(self, agent: str, index: int) -> None:
        queue = self.queues[agent]
        if queue:
            request = queue[index % len(queue)]
            if request.state in ("queued", "running"):
                self.check(request, await self.rt.poll(request.ref))
            else:
                with trio.fail_after(STEP_BOUND):
                    self.check(request, await self.rt.wait(request.ref))

    async def close(self, crash: bool = False) -> None:
        """The program ends (cancelled: its running turns settle ``cancelled``) or dies
        (its running turns stay running in the file), and the next one starts."""
        owner = self.owner
        assert owner is not None
        owner.store.crashed = crash
        owner.scope.cancel()
        await owner.done.wait()
        for queue in self.queues.values():
            for request in queue:
                if request.state != "running":
                    continue
                if not crash:
                    request.state = "cancelled"
                elif self.policy == "retry" and request.runs < 2:
                    request.state = "queued"
                else:
                    request.state = "owner_died"
        await self.open()

    async def crash(self) -> None:
        await self.close(crash=True)

    def check(self, request: _Req, result: object) -> None:
        state = request.state
        if state in ("queued", "running"):
            assert isinstance(result, Pending), (request, result)
        elif state == "complete":
            assert isinstance(result, Completed), (request, result)
            assert result.response.text == f"answer {request.prompt}"
        elif state == "withdrawn":
            assert isinstance(result, Withdrawn), (request, result)
        elif state == "owner_died":
            assert isinstance(result, Failed), (request, result)
            assert isinstance(result.error, OwnerDied), (request, result)
        else:
            assert isinstance(result, Failed), (request, result)
            assert isinstance(result.error, TurnFailed), (request, result)
            assert result.error.reason.value == state, (request, result)

    async def finish(self) -> None:
        """Answer everything still queued, then check every request and every turn."""
        for agent in AGENTS:
            while self.head(agent) is not None:
                await self.answer(agent)
                await self.settle()
        for agent, queue in self.queues.items():
            for request in queue:
                self.check(request, await self.rt.poll(request.ref))
            calls = self.backends[agent].calls
            # In order, each once (a retried one twice in a row, resuming its session).
            assert [call.prompt for call in calls] == [
                request.prompt for request in queue for _ in range(request.runs)
            ]
            for before, call in itertools.pairwise(calls):
                if call.prompt == before.prompt:
                    assert call.session_id == _session(agent)


_agents = st.sampled_from(AGENTS)
_indexes = st.integers(0, 15)
_ops = st.one_of(
    st.tuples(st.just("tell"), _agents, st.sampled_from([None, None, "k0", "k1"])),
    st.tuples(st.just("tell"), _agents, st.none()),
    st.tuples(st.just("withdraw"), _agents, _indexes),
    st.tuples(st.just("answer"), _agents),
    st.tuples(st.just("interrupt"), _agents),
    st.tuples(st.just("wait"), _agents, _indexes),
    st.tuples(st.just("close")),
    st.tuples(st.just("crash")),
)


@pytest.mark.long
@pytest.mark.parametrize("policy", ["fail", "retry"])
@settings(max_examples=EXAMPLES, deadline=None)
@given(ops=st.lists(_ops, max_size=16))
async def test_arbitrary_interleavings_end_each_request_once_as_the_model_says(
    tmp_path_factory: pytest.TempPathFactory, policy: str, ops: list[tuple[Any, ...]]
) -> None:
    """Each example on a file of its own (the examples share the test's fixtures)."""
    path = tmp_path_factory.mktemp("model") / "sessions.sqlite3"
    async with trio.open_nursery() as nursery:
        model = _Model(nursery, path, policy)
        await model.open()
        for op in ops:
            await model.step(op)
        await model.finish()
        assert model.owner is not None
        model.owner.scope.cancel()

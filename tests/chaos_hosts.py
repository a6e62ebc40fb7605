"""Chaos across hosts: runtimes in programs of their own on one PostgreSQL server, agents
asked through the routing while runtimes and the server are killed, frozen and restarted.

    python tests/chaos_hosts.py [--seconds 60] [--runtimes 2] [--agents 20] [--seed N]
                                [--lease-ttl 4] [--keyed] [--settle S]

The runtimes are chaos_host.py programs (``host_agents=True``, so each takes over the
agents whose lease is free); the agents are portable (their transcripts travel in the
store), a third of them warm, on a fake ``claude`` that keeps its conversation in its CLI
home as Claude does (agentrt.testing.fake_cli's ``converse``). This program is the driver:
a runtime of its own that owns no agent and asks every agent, one prompt at a time, through
the store. A fault task picks at random, with a seed that is printed: SIGKILL a runtime (and
start it again), SIGSTOP one for longer than its lease, SIGKILL, stop or SIGSTOP the server.
A sampler reads /proc every 200 ms.

What `run` measures, and the test asserts: every ask ends (a Response or an agentrt error)
within its bound; no prompt reaches a CLI twice; at most one CLI per agent at any sample;
every answered turn is in the conversation of every later answered turn of its agent
(unless its Response said the store does not hold it: ``transcript_stored=False``), on one
session, with no broken transcript line; once the faults stop and every runtime and the
server are back, every agent answers within the settle bound (``recovery``: each agent's
seconds from the last fault undone to its first answer; ``--settle`` waits longer).

``--keyed`` (durable requests, issue 38): each prompt is its own idempotency key, and a
second program (chaos_caller.py) asks the same keyed prompts at its own pace, so each
request is made by whichever program comes first and re-attached to by the other. A keyed
ask that fails is asked again with its key until its request has an outcome (`ask_keyed`).
Then also: every key ends with one outcome, the same for both programs; no answer comes for
a prompt no CLI saw; and after the settle no request is left queued or running in the
store.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import math
import os
import random
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import attrs
import pg_server
import trio
from proc_helpers import MARKER_ENV, Program, kill_marked

import agentrt
from agentrt.testing import fake_cli_executable

CHILD = Path(__file__).parent / "chaos_host.py"

# How long one ask may take before it counts as hung: a turn, plus a takeover after its
# owner died or froze (the lease's ttl, the host's scan), plus a loaded machine's slowness.
ASK_BOUND = 60.0


@attrs.define
class Report:
    seed: int
    seconds: float
    keyed: bool = False
    asks: int = 0
    answered: int = 0
    errors: collections.Counter[str] = attrs.field(factory=collections.Counter)
    hung: list[str] = attrs.field(factory=list)
    faults: collections.Counter[str] = attrs.field(factory=collections.Counter)
    most_clis: int = 0
    crowded: list[str] = attrs.field(factory=list)  # samples with two CLIs of one agent
    repeated: list[str] = attrs.field(factory=list)  # prompts a CLI saw more than once
    lost: list[str] = attrs.field(factory=list)  # answered turns missing later
    unstored: int = 0  # answers that said the store does not hold their turn
    broken: list[str] = attrs.field(factory=list)  # answers that saw broken lines
    sessions_changed: list[str] = attrs.field(factory=list)
    unanswered_after: list[str] = attrs.field(factory=list)  # agents silent after the faults
    settle_seconds: float = 0.0
    # Seconds from the last fault undone to the settle's first asks (the driver's asks
    # cancelled, the second caller closed meanwhile).
    settle_after: float = 0.0
    # Per agent: seconds from the last fault undone to its first answer after it.
    recovery: dict[str, float] = attrs.field(factory=dict)
    # Keyed: each key's one outcome, by kind; keys on which the two callers were told
    # different outcomes; answers for prompts no CLI saw; requests the store still holds
    # queued or running once every agent answered again; the second caller's outcomes.
    outcomes: collections.Counter[str] = attrs.field(factory=collections.Counter)
    disagreed: list[str] = attrs.field(factory=list)
    unseen: list[str] = attrs.field(factory=list)
    stranded: list[str] = attrs.field(factory=list)
    second_caller: int = 0

    def summary(self) -> str:
        return json.dumps(attrs.asdict(self), indent=1, default=list)


@attrs.define
class Answered:
    prompt: str
    session_id: str | None
    seen: list[str]
    broken: int
    # False: the Response said the store does not hold its transcript (it may be lost).
    stored: bool | None


@attrs.frozen
class Final:
    """A keyed request's outcome: ``"complete"`` with its `Response`, or its error's type
    (a `TurnFailed` with its reason)."""

    outcome: str
    response: agentrt.Response | None = None


async def ask_keyed(rt: agentrt.Runtime, name: str, key: str) -> Final:
    """Ask ``name`` the prompt ``key`` under the key ``key`` until its request has an
    outcome: after any error, the key says whether the request was stored (its outcome is
    read, or waited for by asking again with the key) or not (it is asked again)."""
    while True:
        try:
            return Final("complete", await rt.ask(name, key, key=key))
        except agentrt.AgentRTError:
            pass
        try:
            ref = await rt.request(name, key)
            result = None if ref is None else await rt.poll(ref)
        except agentrt.AgentRTError:
            result = None
        if isinstance(result, agentrt.Completed):
            return Final("complete", result.response)
        if isinstance(result, agentrt.Failed):
            error = result.error
            reason = f"({error.reason.value})" if isinstance(error, agentrt.TurnFailed) else ""
            return Final(type(error).__name__ + reason)
        if isinstance(result, agentrt.Withdrawn):
            return Final("withdrawn")
        await trio.sleep(0.25)


class Hosts:
    """The runtime programs, by index: started, killed, frozen, started again."""

    def __init__(self, args: list[str]) -> None:
        self.args = args
        self.programs: dict[int, Program] = {}
        self.frozen: set[int] = set()

    async def start(self, index: int, *names: str) -> None:
        argv = [sys.executable, str(CHILD), *self.args[:1], f"node-{index}", *self.args[1:]]
        process = await trio.lowlevel.open_process(
            [*argv, *names], stdout=subprocess.PIPE, cwd=str(CHILD.parent)
        )
        program = Program(process)
        self.programs[index] = program
        assert await program.line(bound=120) == "READY"

    def signal(self, index: int, signum: signal.Signals) -> None:
        os.kill(self.programs[index].pid, signum)

    async def kill(self, index: int) -> None:
        program = self.programs.pop(index)
        self.frozen.discard(index)
        await program.kill()
        assert program.process.stdout is not None
        await program.process.stdout.aclose()

    async def close(self) -> None:
        """SIGINT each (the runtime closes as on Ctrl+C), SIGKILL what is left after 60 s,
        then whatever carries their turns' marker."""
        for index in list(self.frozen):
            self.signal(index, signal.SIGCONT)
        for program in self.programs.values():
            program.process.send_signal(signal.SIGINT)
        with trio.move_on_after(60, shield=True):
            for program in self.programs.values():
                await program.process.wait()
        for index in list(self.programs):
            pid = self.programs[index].pid
            await self.kill(index)
            await kill_marked(MARKER_ENV, f"{pid}.", prefix=True)


class Database:
    """The PostgreSQL server of the run (tests/pg_server.py), its faults done in a thread."""

    def __init__(self, server: pg_server.Server) -> None:
        self.server = server

    def group(self, signum: signal.Signals) -> None:
        assert self.server.process is not None
        os.killpg(self.server.process.pid, signum)  # the postmaster and every backend

    async def kill(self) -> None:
        self.group(signal.SIGKILL)
        assert self.server.process is not None
        await trio.to_thread.run_sync(self.server.process.wait)
        pg_server.SERVER_PIDS.discard(self.server.process.pid)
        self.server.process = None

    async def start(self) -> None:
        # A killed server's backends may still be leaving its shared memory: try again.
        for attempt in range(20):
            try:
                await trio.to_thread.run_sync(self.server.start)
                return
            except RuntimeError:
                if attempt == 19:
                    raise
                await trio.sleep(0.5)

    async def stop(self) -> None:
        await trio.to_thread.run_sync(self.server.stop)


def cli_counts(homes: str) -> dict[str, int]:
    """Running fake CLIs by the CLI home (so the agent) they run in."""
    counts: collections.Counter[str] = collections.Counter()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                state = f.read().rpartition(b")")[2].split()[0]
            with open(f"/proc/{entry}/environ", "rb") as f:
                environ = f.read().split(b"\0")
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if state in (b"Z", b"X") or b"fake_cli" not in cmdline:
            continue
        for variable in environ:
            if variable.startswith(b"CLAUDE_CONFIG_DIR=" + homes.encode()):
                counts[variable.decode().partition("=")[2]] += 1
    return dict(counts)


@asynccontextmanager
async def open_hosts(
    root: Path, runtimes: int, names: list[str], lease_ttl: float, dsn: str
) -> AsyncIterator[Hosts]:
    """The runtimes started, the agents spread over them (every third warm); every runtime
    closed afterwards."""
    converse = ["converse", {"log": str(root / "prompts.log"), "delay": 0.05}]
    binary = fake_cli_executable(str(root), converse, name="claude")
    warm = root / "warm"
    warm.mkdir()
    warm_binary = fake_cli_executable(str(warm), ["live", {"turns": [[converse]]}], name="claude")
    work = root / "work"
    work.mkdir()
    homes = str(root / "homes")
    hosts = Hosts([dsn, str(lease_ttl), binary, warm_binary, str(work), homes])
    try:
        for index in range(runtimes):
            mine = [
                name + (":warm" if number % 3 == 0 else "")
                for number, name in enumerate(names)
                if number % runtimes == index
            ]
            await hosts.start(index, *mine)
        yield hosts
    finally:
        await hosts.close()


class Chaos:
    """One run: the driver's asks, the faults, the sampler, and what they saw."""

    def __init__(self, report: Report, hosts: Hosts, db: Database, lease_ttl: float) -> None:
        self.report = report
        self.hosts = hosts
        self.db = db
        self.lease_ttl = lease_ttl
        self.random = random.Random(report.seed)
        self.answers: dict[str, list[Answered]] = collections.defaultdict(list)
        # Prompts sent to each agent: ``name/1``, ``name/2``, ... (keyed: their keys too).
        self.sent: collections.Counter[str] = collections.Counter()
        self.finals: dict[str, Final] = {}
        self.started = trio.current_time()

    def say(self, what: str) -> None:
        print(f"{trio.current_time() - self.started:8.2f} s  {what}", flush=True)

    async def ask(self, rt: agentrt.Runtime, name: str) -> bool:
        self.sent[name] += 1
        prompt = f"{name}/{self.sent[name]}"
        self.report.asks += 1
        response: agentrt.Response | None = None
        with trio.move_on_after(ASK_BOUND) as scope:
            if self.report.keyed:
                final = self.finals[prompt] = await ask_keyed(rt, name, prompt)
                self.report.outcomes[final.outcome] += 1
                response = final.response
            else:
                try:
                    response = await rt.ask(name, prompt)
                except agentrt.AgentRTError as error:
                    self.report.errors[type(error).__name__] += 1
        if scope.cancelled_caught:
            self.report.hung.append(prompt)
            return False
        if response is None:
            return False
        answer = json.loads(response.text)
        self.answers[name].append(
            Answered(
                prompt,
                response.session_id,
                answer["prompts"],
                answer["broken"],
                response.transcript_stored,
            )
        )
        self.report.answered += 1
        return True

    async def keep_asking(self, rt: agentrt.Runtime, name: str) -> None:
        rng = random.Random(f"{self.report.seed}/{name}")
        while True:
            await self.ask(rt, name)
            await trio.sleep(rng.uniform(0.5, 2.0))

    async def sample(self, homes: str) -> None:
        while True:
            counts = await trio.to_thread.run_sync(cli_counts, homes)
            for home, count in counts.items():
                self.report.most_clis = max(self.report.most_clis, count)
                if count > 1:
                    self.report.crowded.append(f"{trio.current_time():.1f} {home}: {count}")
            await trio.sleep(0.2)

    async def fault(self) -> None:
        """One fault, done and undone."""
        ttl, rng = self.lease_ttl, self.random
        kind = rng.choice(["kill", "freeze", "db-kill", "db-stop", "db-freeze"])
        index = rng.choice(sorted(self.hosts.programs))
        self.report.faults[kind] += 1
        self.say(f"fault {kind}" + (f" node-{index}" if not kind.startswith("db") else ""))
        if kind == "kill":
            await self.hosts.kill(index)
            await trio.sleep(rng.uniform(0.5, 3))
            await self.hosts.start(index)
        elif kind == "freeze":
            self.hosts.signal(index, signal.SIGSTOP)
            self.hosts.frozen.add(index)
            await trio.sleep(ttl + rng.uniform(0.5, 3))
            self.hosts.signal(index, signal.SIGCONT)
            self.hosts.frozen.discard(index)
        elif kind == "db-kill":
            await self.db.kill()
            await trio.sleep(rng.uniform(0.5, 3))
            await self.db.start()
        elif kind == "db-stop":
            await self.db.stop()
            await trio.sleep(rng.uniform(0.5, 3))
            await self.db.start()
        else:
            self.db.group(signal.SIGSTOP)
            await trio.sleep(rng.uniform(1, ttl / 2 + 2))
            self.db.group(signal.SIGCONT)

    async def settle(
        self, rt: agentrt.Runtime, names: list[str], bound: float, faults_over: float
    ) -> None:
        """Every agent asked until it answers, all at once, within ``bound``; each one's
        recovery counted from ``faults_over``, the moment the last fault was undone."""
        start = trio.current_time()
        self.report.settle_after = round(start - faults_over, 2)
        self.say("every agent asked until it answers")
        waiting = set(names)

        async def until_answered(name: str) -> None:
            while not await self.ask(rt, name):  # noqa: ASYNC110 (asked again, not polled)
                await trio.sleep(0.2)
            self.report.recovery[name] = round(trio.current_time() - faults_over, 2)
            waiting.discard(name)

        with trio.move_on_after(bound):
            async with trio.open_nursery() as nursery:
                for name in names:
                    nursery.start_soon(until_answered, name)
        self.report.settle_seconds = trio.current_time() - start
        self.report.unanswered_after = sorted(waiting)

    def judge(self, log: Path, second: list[str]) -> None:
        """What the CLIs saw against what the driver (and, keyed, the second caller, its
        ``RESULT`` lines ``second``) was answered."""
        seen = collections.Counter(
            line.split(" ", 1)[1] for line in log.read_text().splitlines() if " " in line
        )
        self.report.repeated = sorted(prompt for prompt, n in seen.items() if n > 1)
        for key, final in self.finals.items():
            if final.outcome == "complete" and key not in seen:
                self.report.unseen.append(key)
        for line in second:
            _, key, outcome, session = line.split(" ")
            self.report.second_caller += 1
            if outcome == "complete" and key not in seen:
                self.report.unseen.append(key)
            mine = self.finals.get(key)
            if mine is None:
                continue  # the driver did not get this far
            response = mine.response
            if (mine.outcome, str(response and response.session_id)) != (outcome, session):
                self.report.disagreed.append(f"{key}: {mine.outcome} here, {outcome} there")
        for name, answers in self.answers.items():
            if len({answer.session_id for answer in answers}) > 1:
                self.report.sessions_changed.append(name)
            for index, answer in enumerate(answers):
                if answer.broken:
                    self.report.broken.append(answer.prompt)
                if answer.stored is False:
                    self.report.unstored += 1
                    continue  # the answer said so: not a silent loss
                for later in answers[index + 1 :]:
                    if answer.prompt not in later.seen:
                        self.report.lost.append(f"{answer.prompt} (missing at {later.prompt})")
                        break


async def stranded(dsn: str) -> list[str]:
    """The requests the store holds queued or running, once they had time to end (read
    from its table: a running request has no reader in the store's protocol)."""
    import psycopg

    sql = (
        "SELECT name, request_key, state FROM agentrt.requests WHERE state IN ('queued', 'running')"
    )

    def read() -> list[tuple[str, str, str]]:
        with psycopg.connect(dsn) as conn:
            return conn.execute(sql).fetchall()

    rows = []
    for _ in range(60):
        rows = await trio.to_thread.run_sync(read)
        if not rows:
            break
        await trio.sleep(0.5)
    return sorted(f"{name} {key} {state}" for name, key, state in rows)


@asynccontextmanager
async def second_caller(dsn: str, lease_ttl: float, names: list[str]) -> AsyncIterator[list[str]]:
    """chaos_caller.py asking ``names`` until the block ends; then its ``RESULT`` lines."""
    argv = [sys.executable, str(CHILD.parent / "chaos_caller.py"), dsn, str(lease_ttl), *names]
    process = await trio.lowlevel.open_process(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=str(CHILD.parent)
    )
    program, results = Program(process), []
    try:
        assert await program.line(bound=120) == "READY"
        async with trio.open_nursery() as nursery:

            async def read() -> None:
                while (line := await program.line(bound=math.inf)) != "DONE":
                    results.append(line)

            nursery.start_soon(read)
            try:
                yield results
            finally:
                assert process.stdin is not None
                await process.stdin.aclose()
                with trio.move_on_after(60, shield=True):
                    await process.wait()
    finally:
        await program.kill()


async def run(
    seconds: float,
    runtimes: int,
    agents: int,
    seed: int,
    lease_ttl: float = 4.0,
    *,
    keyed: bool = False,
    settle: float | None = None,
) -> Report:
    """One chaos run; returns what it saw (see the module's docstring). ``settle`` bounds
    the wait for every agent's answer after the faults (``lease_ttl`` + 20 s unless given;
    longer to measure each agent's recovery where the bound is missed)."""
    settle = lease_ttl + 20 if settle is None else settle
    report = Report(seed=seed, seconds=seconds, keyed=keyed)
    names = [f"c{index}" for index in range(agents)]
    with tempfile.TemporaryDirectory(prefix="agentrt-chaos-") as folder:
        root = Path(folder)
        with pg_server.running_server() as server:
            db = Database(server)
            dsn = server.dsn()
            async with open_hosts(root, runtimes, names, lease_ttl, dsn) as hosts:
                chaos = Chaos(report, hosts, db, lease_ttl)
                chaos.say(f"seed {seed}: {runtimes} runtimes, {agents} agents, {seconds} s")
                async with agentrt.open_runtime(
                    store=agentrt.PostgresStore(dsn),
                    node="driver",
                    lease_ttl=lease_ttl,
                    kill_grace=0.5,
                ) as rt:
                    async with AsyncExitStack() as stack:
                        second: list[str] = []
                        if keyed:
                            second = await stack.enter_async_context(
                                second_caller(dsn, lease_ttl, names)
                            )
                        async with trio.open_nursery() as nursery:
                            nursery.start_soon(chaos.sample, str(root / "homes"))
                            for name in names:
                                nursery.start_soon(chaos.keep_asking, rt, name)
                            end = trio.current_time() + seconds
                            while trio.current_time() < end:
                                await chaos.fault()  # each undone before the next
                                await trio.sleep(chaos.random.uniform(0.5, 2))
                            chaos.say("faults over: every runtime and the server back")
                            faults_over = trio.current_time()
                            nursery.cancel_scope.cancel()
                    await chaos.settle(rt, names, settle, faults_over)
                    if keyed:
                        report.stranded = await stranded(dsn)
                chaos.judge(root / "prompts.log", second)
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--runtimes", type=int, default=2)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    parser.add_argument("--lease-ttl", type=float, default=4.0)
    parser.add_argument("--keyed", action="store_true", help="durable requests, two callers")
    parser.add_argument("--settle", type=float, help="seconds to wait for every agent after")
    args = parser.parse_args()
    report = trio.run(
        functools.partial(
            run,
            args.seconds,
            args.runtimes,
            args.agents,
            args.seed,
            args.lease_ttl,
            keyed=args.keyed,
            settle=args.settle,
        )
    )
    print(report.summary())


if __name__ == "__main__":
    main()

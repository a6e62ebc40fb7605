"""Telemetry (agentrt._telemetry) through the public API: spans, their parents and
attributes, metrics, structured log fields, nothing of the content, and nothing at all
without an SDK. Real processes: the claude backend on the fake CLI (tests/cli_programs.py)."""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio
from _helpers import echo_backend
from cli_programs import SID, FakeClaude, init_frame, result_frame
from doc_blocks import doc_block
from opentelemetry import metrics
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from otel_helpers import Telemetry, events, parent_id, recording, span_id, unset_providers
from proc_helpers import turn_processes, wait_until
from test_durable_cli import killed_child
from trio.testing import MockClock

import agentrt
from agentrt import Agent, MemoryStore, SQLiteStore, StopReason, TurnFailed, open_runtime
from agentrt._telemetry._log_fields import LOGGERS
from agentrt._telemetry._otel import TurnTrace
from agentrt.testing import Fail, fake_cli_executable

FAST = {"kill_grace": 0.3}


@pytest.fixture
def otel() -> Iterator[Telemetry]:
    with recording() as telemetry:
        yield telemetry


def usage_result(text: str) -> dict[str, Any]:
    return {**result_frame(text), "usage": {"input_tokens": 11, "output_tokens": 7}}


def answering(text: str = "done") -> list[Any]:
    return [["emit", init_frame()], ["emit", usage_result(text)]]


def tool_in_own_session(marker: str, cli_pid: int | None) -> bool:
    tools = [p for p in turn_processes(marker) if p.pid != cli_pid]
    return len(tools) == 1 and tools[0].sid == tools[0].pid


class Watched(Agent):
    """Lets a test wait until the CLI has reported its session."""

    def __init__(self) -> None:
        self.session_seen = trio.Event()

    def handle_stream_event(self, event: agentrt.Event) -> None:
        if isinstance(event, agentrt.SessionEvent):
            self.session_seen.set()


async def test_a_complete_turn_is_a_span_under_the_caller_of_ask_and_of_tell(
    tmp_path: Path, otel: Telemetry
) -> None:
    cli = FakeClaude(tmp_path / "cli", answering())
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="coder", backend="claude", binary=cli.binary, **FAST)
        with otel.tracer.start_as_current_span("caller") as caller:
            response = await rt.ask("coder", "what is it?")
        with otel.tracer.start_as_current_span("teller") as teller:
            ref = await rt.tell("coder", "and now?")
        # Waited for outside the span: the turn keeps the context tell was called in.
        with trio.fail_after(30):
            await rt.wait(ref)

    asked, told = otel.named("invoke_agent")
    assert (asked.name, asked.kind) == ("invoke_agent coder", SpanKind.CLIENT)
    assert parent_id(asked) == span_id(caller) and parent_id(told) == span_id(teller)
    assert (
        asked.context is not None and caller.get_span_context().trace_id == asked.context.trace_id
    )
    assert dict(asked.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "coder",
        "agentrt.backend": "claude",
        "gen_ai.conversation.id": SID,
        "agentrt.stop_reason": "complete",
        "process.exit.code": 0,
        "gen_ai.usage.input_tokens": 11,
        "gen_ai.usage.output_tokens": 7,
        "gen_ai.usage.cache_read.input_tokens": 0,
        "gen_ai.usage.cache_creation.input_tokens": 0,
        "agentrt.cost_usd": 0.01,
        "agentrt.events.retained": response.event_coverage.retained,
        "agentrt.events.omitted": 0,
        "gen_ai.response.model": "fake-model",
        "agentrt.processes.killed": 0,
    }
    assert asked.status.status_code is StatusCode.UNSET
    found = events(asked)
    assert set(found) == {"agentrt.spawn", "agentrt.first_event"}
    assert found["agentrt.spawn"]["process.pid"] > 0
    assert found["agentrt.first_event"]["agentrt.time_to_first_event"] >= 0

    complete = {"agentrt.backend": "claude", "agentrt.stop_reason": "complete"}
    assert otel.total("agentrt.turns", **complete) == 2
    assert otel.count("agentrt.turn.duration", **complete) == 2
    assert otel.count("agentrt.turn.time_to_first_event", **{"agentrt.backend": "claude"}) == 2
    tokens = {"gen_ai.agent.name": "coder", "gen_ai.operation.name": "invoke_agent"}
    assert otel.total("gen_ai.client.token.usage", **tokens, **{"gen_ai.token.type": "input"}) == 22
    assert (
        otel.total("gen_ai.client.token.usage", **tokens, **{"gen_ai.token.type": "output"}) == 14
    )
    # The CLI reports the session's running cost (0.01 both times): the second turn's is 0.
    assert otel.total("agentrt.cost", **{"gen_ai.agent.name": "coder"}) == pytest.approx(0.01)


async def test_a_failed_turn_is_an_error_span_with_its_reason_and_exit_code(
    tmp_path: Path, otel: Telemetry
) -> None:
    cli = FakeClaude(tmp_path / "cli", [["emit", init_frame()], ["exit", 3]])
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="coder", backend="claude", binary=cli.binary, **FAST)
        with pytest.raises(TurnFailed) as failed:
            await rt.ask("coder", "go")
    assert failed.value.reason is StopReason.MALFORMED_OUTPUT

    [span] = otel.named("invoke_agent")
    attributes = dict(span.attributes or {})
    assert attributes["agentrt.stop_reason"] == attributes["error.type"] == "malformed_output"
    assert attributes["process.exit.code"] == 3
    assert attributes["gen_ai.conversation.id"] == SID
    assert (span.status.status_code, span.status.description) == (
        StatusCode.ERROR,
        "malformed_output",
    )
    assert "agentrt.events.retained" not in attributes  # a failure keeps no events
    malformed = {"agentrt.backend": "claude", "agentrt.stop_reason": "malformed_output"}
    assert otel.total("agentrt.turns", **malformed) == 1


async def test_an_interrupt_and_the_kill_of_what_the_turn_left_are_events(
    tmp_path: Path, otel: Telemetry
) -> None:
    # The CLI reports its session and hangs; its tool runs on in a session of its own.
    cli = FakeClaude(tmp_path / "cli")
    agent = Watched()
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(agent, name="coder", backend="claude", binary=cli.binary, **FAST)
        ref = await rt.tell("coder", "long job")
        queued = await rt.tell("coder", "after it")
        with trio.fail_after(30):
            await agent.session_seen.wait()
        # The CLI and the tool it started, once the tool is in a session of its own (the
        # CLI's group signal would reach it before).
        [live] = await rt.store.live_processes()
        await wait_until(lambda: tool_in_own_session(live.live_marker or "-", live.live_pid))
        assert otel.total("agentrt.processes.live") == 1
        assert otel.total("agentrt.requests.queued", **{"gen_ai.agent.name": "coder"}) == 1
        assert await rt.interrupt("coder")
        assert await rt.withdraw(queued)
        with trio.fail_after(30):
            await rt.wait(ref)
        assert otel.total("agentrt.processes.live") == 0
        assert otel.total("agentrt.requests.queued", **{"gen_ai.agent.name": "coder"}) == 0

    [span] = otel.named("invoke_agent")
    attributes = dict(span.attributes or {})
    assert attributes["agentrt.stop_reason"] == "interrupted"
    assert span.status.status_code is StatusCode.ERROR
    found = events(span)
    assert set(found) == {"agentrt.spawn", "agentrt.interrupt", "agentrt.kill"}
    assert found["agentrt.interrupt"] == {"agentrt.stop_reason": "interrupted"}
    # The tool, which the CLI's group signal did not reach, was killed by the ladder.
    assert found["agentrt.kill"]["agentrt.processes.killed"] >= 1
    assert (
        attributes["agentrt.processes.killed"] == found["agentrt.kill"]["agentrt.processes.killed"]
    )
    spawn, interrupt, kill = sorted(span.events, key=lambda event: event.timestamp)
    assert (spawn.name, interrupt.name, kill.name) == (
        "agentrt.spawn",
        "agentrt.interrupt",
        "agentrt.kill",
    )


class CrashesOnce(Agent):
    crashes: list[str] = []

    def handle_response(self, ref: agentrt.Ref, response: agentrt.Response) -> None:
        if not CrashesOnce.crashes:
            CrashesOnce.crashes.append(response.text)
            raise RuntimeError("handle_response failed")


async def test_a_supervisor_restart_is_a_span_and_is_counted(
    autojump_clock: MockClock, otel: Telemetry
) -> None:
    CrashesOnce.crashes = []
    async with open_runtime(store=MemoryStore(), backoff=0.5) as rt:
        await rt.start_agent(CrashesOnce, name="a", backend=echo_backend(), restart="permanent")
        await rt.start_agent(Agent, name="b", backend=echo_backend())
        with pytest.raises(agentrt.AgentStopped):
            await rt.ask("a", "one")
        # Sent while it restarts: it waits for the new instance.
        with otel.tracer.start_as_current_span("after") as after:
            await rt.ask("a", "two")

    [restart] = otel.named("agentrt.restart")
    assert dict(restart.attributes or {}) == {
        "gen_ai.agent.name": "a",
        "agentrt.restart.agents": ("a",),
        "agentrt.restart.delay": 0.5,
        "agentrt.restart.count": 1,
    }
    assert restart.status.status_code is StatusCode.UNSET
    first, second = otel.named("invoke_agent a")
    # The crash came after the turn: the turn itself completed.
    assert dict(first.attributes or {})["agentrt.stop_reason"] == "complete"
    # The new instance's turn belongs to its caller, not to the restart.
    assert parent_id(second) == span_id(after)
    assert otel.total("agentrt.restarts", **{"gen_ai.agent.name": "a"}) == 1
    assert otel.total("agentrt.restarts", **{"gen_ai.agent.name": "b"}) == 0
    assert otel.total("agentrt.turns", **{"agentrt.backend": "scripted"}) == 2


async def test_a_reap_of_a_dead_runtimes_turn_is_a_span_and_is_counted(
    tmp_path: Path, otel: Telemetry
) -> None:
    cli = FakeClaude(tmp_path / "cli")
    async with killed_child(tmp_path, cli) as (store_path, prefix):
        with otel.tracer.start_as_current_span("opener") as opener:
            async with open_runtime(store=SQLiteStore(store_path)):
                pass
    [reap] = otel.named("agentrt.reap")
    assert parent_id(reap) == span_id(opener)
    attributes = dict(reap.attributes or {})
    assert attributes["gen_ai.agent.name"] == "coder"
    assert attributes["agentrt.reap.killed"] is True
    assert isinstance(attributes["agentrt.reap.pgid"], int)
    # The dead runtime's id: host, its pid (the marker's prefix), start time, random part.
    assert f":{prefix.rstrip('.')}:" in str(attributes["agentrt.reap.runtime_id"])
    assert otel.total("agentrt.reaped", **{"agentrt.reap.killed": True}) == 1


async def test_a_lost_session_is_an_event_of_its_turn_and_the_fresh_turn_a_span_of_its_own(
    autojump_clock: MockClock, otel: Telemetry
) -> None:
    backend = echo_backend([Fail(StopReason.SESSION_LOST, "No conversation found: LOSTCANARY")])
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="a", backend=backend, resume="gone-session", on_session_lost="fresh"
        )
        with otel.tracer.start_as_current_span("caller") as caller:
            response = await rt.ask("a", "hello")
    assert response.text == "echo hello"

    lost, fresh = otel.named("invoke_agent a")
    assert parent_id(lost) == parent_id(fresh) == span_id(caller)
    assert events(lost)["agentrt.session_lost"] == {"gen_ai.conversation.id": "gone-session"}
    assert dict(lost.attributes or {})["error.type"] == "session_lost"
    assert dict(fresh.attributes or {})["agentrt.stop_reason"] == "complete"
    assert "agentrt.session_lost" not in events(fresh)
    assert "LOSTCANARY" not in otel.exported_text()


SECRET = "sk-ant-api03-CANARYSECRET0123456789abcdefghij"
PROMPT = "PROMPTCANARY: what does foo() do?"
TOOL_INPUT = "TOOLCANARY"
ANSWER = "ANSWERCANARY: it adds"
FAILURE = "FAILURECANARY: the model refused"


def tool_and_answer() -> list[Any]:
    tool_use = {
        "type": "assistant",
        "session_id": SID,
        "message": {
            "id": "msg_1",
            "role": "assistant",
            "model": "fake-model",
            "content": [
                {"type": "text", "text": ANSWER},
                {
                    "type": "tool_use",
                    "id": "toolu_1",
                    "name": "Bash",
                    "input": {"command": f"echo {TOOL_INPUT} {SECRET}"},
                },
            ],
        },
    }
    return [["emit", init_frame()], ["emit", tool_use], ["emit", usage_result(ANSWER)]]


def failing() -> list[Any]:
    error = {**usage_result(FAILURE), "is_error": True}
    return [["emit", init_frame()], ["stderr", f"{FAILURE} {SECRET}\n", 1], ["emit", error]]


async def test_no_prompt_answer_tool_input_or_secret_is_exported_or_logged(
    tmp_path: Path, otel: Telemetry, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="agentrt")
    cli = FakeClaude(tmp_path / "cli", tool_and_answer())
    env = {"ANTHROPIC_API_KEY": SECRET}
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="claude", binary=cli.binary, env=env, **FAST
        )
        with otel.tracer.start_as_current_span("caller"):
            response = await rt.ask("coder", PROMPT)
            assert ANSWER in response.text  # it did go through the turn
            cli.run(failing())
            with pytest.raises(TurnFailed) as failed:
                await rt.ask("coder", f"{PROMPT} {SECRET}")
    assert FAILURE in failed.value.message

    assert len(otel.named("invoke_agent")) == 2
    exported = otel.exported_text()
    logged = "\n".join(
        f"{record.getMessage()} {json.dumps(vars(record), default=str)}"
        for record in caplog.records
    )
    assert "invoke_agent coder" in exported and "turn ended" in logged  # not empty
    for canary in ("PROMPTCANARY", TOOL_INPUT, "ANSWERCANARY", "FAILURECANARY", "CANARYSECRET"):
        assert canary not in exported
        assert canary not in logged


async def test_every_record_of_a_turn_carries_the_agents_fields(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="agentrt")
    cli = FakeClaude(tmp_path / "cli", answering())
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(Agent, name="coder", backend="claude", binary=cli.binary, **FAST)
        ref = await rt.tell("coder", "go")
        with trio.fail_after(30):
            await rt.wait(ref)
    records = [r for r in caplog.records if getattr(r, "agent", None) == "coder"]
    messages = [r.getMessage() for r in records]
    assert any("turn starts" in m for m in messages), messages
    assert any("CLI started" in m for m in messages), messages
    for record in records:
        assert (record.agent, record.backend, record.request_id) == ("coder", "claude", ref.id)  # type: ignore[attr-defined]
    [ended] = [r for r in records if "turn ended" in r.getMessage()]
    assert (ended.session_id, ended.outcome) == (SID, "complete")  # type: ignore[attr-defined]


def test_the_runtime_logs_only_to_loggers_that_add_the_fields() -> None:
    package = Path(agentrt.__file__).parent
    names = set()
    for source in package.rglob("*.py"):
        if "_cli" not in source.parts:  # the command configures logging, it is no record
            names |= set(re.findall(r"getLogger\(\"([^\"]*)\"\)", source.read_text()))
    assert names == set(LOGGERS)


async def test_an_agents_log_fields_reach_the_tasks_under_it_and_leave_with_the_block() -> None:
    from agentrt._telemetry._log_fields import AgentLogs

    class Capture(logging.Handler):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[tuple[str | None, str]] = []

        def emit(self, record: logging.LogRecord) -> None:
            self.seen.append((getattr(record, "agent", None), record.getMessage()))

    logger = logging.getLogger(LOGGERS[0])
    capture = Capture()
    logger.addHandler(capture)
    old_level = logger.level
    logger.setLevel(logging.INFO)

    def slot(name: str) -> Any:
        return types.SimpleNamespace(name=name, backend="claude", current=None, session_id=None)

    async def child(message: str) -> None:
        logger.info(message)

    try:
        with AgentLogs(slot("outer")):
            logger.info("bound")
            with AgentLogs(slot("inner")):
                logger.info("nested")
            logger.info("outer again")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(child, "from a task under it")
        logger.info("after")
        await trio.to_thread.run_sync(lambda: logger.info("from a thread"))
    finally:
        logger.removeHandler(capture)
        logger.setLevel(old_level)
    assert capture.seen == [
        ("outer", "bound"),
        ("inner", "nested"),
        ("outer", "outer again"),
        ("outer", "from a task under it"),
        (None, "after"),
        (None, "from a thread"),
    ]


async def test_warm_process_hits_and_misses_are_counted(otel: Telemetry, tmp_path: Path) -> None:
    # Three turns on a warm fake CLI, then one after recycling: a miss, two hits, a miss.
    binary = fake_cli_executable(str(tmp_path), ["live", {}])
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="claude", binary=binary, keep_alive=30, recycle_turns=3
        )
        for prompt in ("one", "two", "three", "four"):
            await rt.ask("coder", prompt)
    labels = {"gen_ai.agent.name": "coder", "agentrt.backend": "claude"}
    assert otel.total("agentrt.warm.hits", **labels) == 2
    assert otel.total("agentrt.warm.misses", **labels) == 2


async def test_a_provider_configured_or_unset_later_is_seen_by_the_next_turn() -> None:
    assert TurnTrace.start(None, "a", "scripted", None) is None
    with recording():
        trace = TurnTrace.start(None, "a", "scripted", None)
        assert trace is not None
        trace.close()
    assert TurnTrace.start(None, "a", "scripted", None) is None


# A fresh interpreter, as a program without the extra (or without an SDK) runs.
NO_SDK = """
import sys
if sys.argv[1] == "no-api":
    sys.modules["opentelemetry"] = None  # as if the otel extra were not installed
if sys.argv[1] == "api-used":
    import opentelemetry.trace  # the program uses the API (no SDK set)
import trio
import agentrt
from agentrt._telemetry import _otel
from agentrt.testing import ScriptedBackend, reply

async def main():
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        backend = ScriptedBackend(default=lambda call: reply("hi"))
        await rt.start_agent(agentrt.Agent, name="a", backend=backend)
        response = await rt.ask("a", "hello")
    resolved = _otel._resolved
    trace = _otel.TurnTrace.start(None, "a", "b", None)
    context = type(_otel.capture_context()).__name__
    no_api = _otel.API_VERSION is None
    print(response.text, no_api, trace, resolved.tracer, resolved.instruments, context)
    # Only a program that uses the API has agentrt import its tracing and metrics.
    print(sorted(m for m in ("opentelemetry.trace", "opentelemetry.metrics") if m in sys.modules))

trio.run(main)
"""


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("no-api", "hi True None None None NoneType\n[]"),
        ("no-sdk", "hi False None None None NoneType\n[]"),
        ("api-used", "hi False None None None Context\n['opentelemetry.trace']"),
    ],
)
def test_without_an_sdk_a_turn_makes_no_span_and_no_measurement(mode: str, expected: str) -> None:
    run = subprocess.run(
        [sys.executable, "-c", NO_SDK, mode], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == expected


FROM_ENVIRON = """
import trio
import agentrt
from agentrt._telemetry import _otel
from agentrt.testing import ScriptedBackend, reply

async def main():
    async with agentrt.open_runtime(store=agentrt.MemoryStore()) as rt:
        backend = ScriptedBackend(default=lambda call: reply("hi"))
        await rt.start_agent(agentrt.Agent, name="a", backend=backend)
        await rt.ask("a", "hello")
    print(type(_otel._resolved.tracer).__module__, type(_otel._resolved.instruments).__name__)

trio.run(main)
"""


def test_providers_the_environment_names_record_the_turns() -> None:
    # The API loads them at its first look-up; a turn without a provider set looks the
    # environment up only as its runtime opens, which must still find them.
    env = {
        **os.environ,
        "OTEL_PYTHON_TRACER_PROVIDER": "sdk_tracer_provider",
        "OTEL_PYTHON_METER_PROVIDER": "sdk_meter_provider",
    }
    run = subprocess.run(
        [sys.executable, "-c", FROM_ENVIRON], capture_output=True, text=True, timeout=60, env=env
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["opentelemetry.sdk.trace", "_Instruments"]


async def test_the_readmes_json_log_setup_indexes_the_agents_fields(
    autojump_clock: MockClock,
) -> None:
    namespace: dict[str, Any] = {}
    exec(compile(doc_block("JsonFormatter"), "telemetry.md", "exec"), namespace)
    handler: logging.StreamHandler[Any] = namespace["handler"]
    out = io.StringIO()
    handler.setStream(out)
    try:
        CrashesOnce.crashes = []
        async with open_runtime(store=MemoryStore()) as rt:
            await rt.start_agent(CrashesOnce, name="a", backend=echo_backend(), restart="permanent")
            ref = await rt.tell("a", "one")
            await rt.wait(ref)
            await rt.ask("a", "two")  # waits for the restarted instance
    finally:
        logging.getLogger("agentrt").removeHandler(handler)
    entries = [json.loads(line) for line in out.getvalue().splitlines()]
    [crashed] = [e for e in entries if "crashed" in e["msg"]]
    assert crashed["level"] == "ERROR" and crashed["request_id"] == ref.id
    assert (crashed["agent"], crashed["backend"]) == ("a", "scripted")
    [restart] = [e for e in entries if "restarting" in e["msg"]]
    assert (restart["level"], restart["agent"]) == ("WARNING", "a")


OTLP_MODULES = ("exporter", "exporter.otlp", "exporter.otlp.proto", "exporter.otlp.proto.http")


async def test_the_readmes_otlp_setup_exports_a_turns_span_and_metrics(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The OTLP exporter package, stood in for by in-memory and text exporters.
    spans = InMemorySpanExporter()
    exported_metrics = io.StringIO()
    for name in OTLP_MODULES:
        monkeypatch.setitem(sys.modules, f"opentelemetry.{name}", types.ModuleType(name))
    http = "opentelemetry.exporter.otlp.proto.http"
    trace_exporter = types.ModuleType(f"{http}.trace_exporter")
    trace_exporter.OTLPSpanExporter = lambda: spans  # type: ignore[attr-defined]
    metric_exporter = types.ModuleType(f"{http}.metric_exporter")
    metric_exporter.OTLPMetricExporter = lambda: ConsoleMetricExporter(out=exported_metrics)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, trace_exporter.__name__, trace_exporter)
    monkeypatch.setitem(sys.modules, metric_exporter.__name__, metric_exporter)
    namespace: dict[str, Any] = {}
    try:
        exec(compile(doc_block("OTLPSpanExporter"), "telemetry.md", "exec"), namespace)
        async with open_runtime(store=MemoryStore()) as rt:
            await rt.start_agent(Agent, name="a", backend=echo_backend())
            await rt.ask("a", "hello")
        namespace["tracer_provider"].shutdown()  # flushes the batch
        metrics.get_meter_provider().shutdown()  # type: ignore[attr-defined]
    finally:
        unset_providers()
    assert [span.name for span in spans.get_finished_spans()] == ["invoke_agent a"]
    assert '"name": "agentrt.turns"' in exported_metrics.getvalue()

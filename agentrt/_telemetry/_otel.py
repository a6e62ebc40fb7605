"""Telemetry: OpenTelemetry spans and metrics (the optional ``otel`` extra). The fields of
the runtime's log records are set in `_log_fields`.

agentrt is a library, so it only speaks the OpenTelemetry API; the application configures
an SDK (or runs under ``opentelemetry-instrument``). Without the API installed, or with
only the API's own providers (a proxy waiting for an SDK, or a no-op), every hook here is
a check of one cached value: a turn then makes no span, no context and no measurement.
The API's tracing and metrics modules are imported only once something else has (an SDK
is set through them) or the environment names a provider: the ``agentrt`` command and a
program that does not use OpenTelemetry do not pay for them.

Everything recorded is content-free: names, ids, counts, durations, stop reasons. Never a
prompt, an answer, a tool input, an error message (it may quote any of those) or a secret.

Spans: ``invoke_agent <agent>`` per turn (parent: the span current where its request was
made, captured with the request), with events for spawn, first event, interrupt, kill and
session loss; ``agentrt.restart`` per supervisor restart; ``agentrt.reap`` per process
group of a dead runtime. Metrics: see ``_COUNTERS`` and the tables after it.
"""

from __future__ import annotations

import os
import sys
import weakref
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol

import attrs
import trio

from .._errors import TurnFailed
from .._events import Response, StopReason
from ..backend import ExitStatus

if TYPE_CHECKING:
    from opentelemetry import metrics
    from opentelemetry.metrics import CallbackOptions, Observation
    from opentelemetry.trace import Span, Status, Tracer

try:  # two modules of constants; the API's tracing and metrics are imported when used
    from opentelemetry.environment_variables import (
        OTEL_PYTHON_METER_PROVIDER,
        OTEL_PYTHON_TRACER_PROVIDER,
    )
    from opentelemetry.version import __version__ as _api_version
except ImportError:  # the otel extra is not installed
    API_VERSION: str | None = None
else:
    API_VERSION = _api_version

__all__ = [
    "API_VERSION",
    "Gauges",
    "TelemetryStatus",
    "TracedProcess",
    "TurnTrace",
    "capture_context",
    "reap_span",
    "record_warm_process",
    "restart_span",
    "status",
    "track_runtime",
]

# The instrumentation scope (no version: importlib.metadata is not imported with agentrt).
_SCOPE = "agentrt"

# Attribute names: the GenAI semantic conventions where one fits, agentrt.* otherwise.
AGENT = "gen_ai.agent.name"
OPERATION = "gen_ai.operation.name"
CONVERSATION = "gen_ai.conversation.id"
MODEL = "gen_ai.response.model"
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
CACHE_READ_TOKENS = "gen_ai.usage.cache_read.input_tokens"
CACHE_CREATION_TOKENS = "gen_ai.usage.cache_creation.input_tokens"
TOKEN_TYPE = "gen_ai.token.type"
ERROR_TYPE = "error.type"
BACKEND = "agentrt.backend"
STOP_REASON = "agentrt.stop_reason"
CLI_VERSION = "agentrt.cli.version"
_INVOKE_AGENT = "invoke_agent"


################################################################
# Is an SDK configured? (checked per turn, cached per provider)
################################################################


def _real(provider: object, api_module: str) -> bool:
    # The API's own providers (the proxy that waits for an SDK, the no-op) live in its
    # modules; any provider that records (the SDK's, a vendor's) comes from elsewhere.
    return not type(provider).__module__.startswith(api_module)


@attrs.define
class _Resolved:
    """The tracer and instruments of the providers seen last (None: not recording)."""

    tracer_provider: object = None
    tracer: Tracer | None = None
    meter_provider: object = None
    instruments: _Instruments | None = None
    # Whether the environment names a provider (the API loads it at its first look-up),
    # as it did when a runtime last opened; until then, assumed.
    tracer_from_environ: bool = True
    meter_from_environ: bool = True

    def runtime_opened(self) -> None:
        self.tracer_from_environ = OTEL_PYTHON_TRACER_PROVIDER in os.environ
        self.meter_from_environ = OTEL_PYTHON_METER_PROVIDER in os.environ

    def current_tracer(self) -> Tracer | None:
        # The API's global, read as is: with none set, get_tracer_provider looks the
        # environment up on every call, which a turn would pay for nothing recorded. Until
        # something imports the API's tracing, none can have been set.
        if not self.tracer_from_environ:
            loaded = sys.modules.get("opentelemetry.trace")
            if loaded is None or loaded._TRACER_PROVIDER is None:
                return None
        from opentelemetry import trace

        provider = trace.get_tracer_provider()
        if provider is not self.tracer_provider:
            self.tracer_provider = provider
            real = _real(provider, "opentelemetry.trace")
            self.tracer = provider.get_tracer(_SCOPE) if real else None
        return self.tracer

    def current_instruments(self) -> _Instruments | None:
        if not self.meter_from_environ:
            loaded = sys.modules.get("opentelemetry.metrics._internal")
            if loaded is None or loaded._METER_PROVIDER is None:
                return None
        from opentelemetry import metrics

        provider = metrics.get_meter_provider()
        if provider is not self.meter_provider:
            self.meter_provider = provider
            meter = provider.get_meter(_SCOPE)
            real = _real(provider, "opentelemetry.metrics")
            self.instruments = _Instruments.create(meter) if real else None
        return self.instruments


_resolved = _Resolved()


def _tracer() -> Tracer | None:
    return None if API_VERSION is None else _resolved.current_tracer()


def _instruments() -> _Instruments | None:
    return None if API_VERSION is None else _resolved.current_instruments()


@attrs.frozen
class TelemetryStatus:
    """Whether telemetry records anything here (``agentrt doctor`` shows it)."""

    api_version: str | None
    # The configured providers' class names; None: the API's proxy or no-op (nothing kept).
    tracer_provider: str | None
    meter_provider: str | None


def status() -> TelemetryStatus:
    if API_VERSION is None:
        return TelemetryStatus(None, None, None)
    from opentelemetry import metrics, trace

    tracer_provider = trace.get_tracer_provider()
    meter_provider = metrics.get_meter_provider()

    def name(provider: object, api_module: str) -> str | None:
        kind = type(provider)
        return f"{kind.__module__}.{kind.__qualname__}" if _real(provider, api_module) else None

    return TelemetryStatus(
        API_VERSION,
        name(tracer_provider, "opentelemetry.trace"),
        name(meter_provider, "opentelemetry.metrics"),
    )


################################################################
# Metrics
################################################################


class Gauges(Protocol):
    """What a runtime hands telemetry for its observable counts. They are read in the
    metric reader's thread, so each is copied or counted in one step."""

    @property
    def closed(self) -> bool: ...

    def live_processes(self) -> int:
        """The CLI processes of its running turns."""
        ...

    def queued(self) -> Iterable[tuple[str, int]]:
        """Each agent's name and the requests in its mailbox."""
        ...

    def budgets_left(self) -> Iterable[tuple[str, float]]:
        """Each agent under a USD budget: its name and what is left of the tightest."""
        ...


# Open runtimes, for the observable counts: the tuple is replaced whole, never changed in
# place (the metric reader's thread reads it).
_runtimes: tuple[weakref.ref[Gauges], ...] = ()


def track_runtime(gauges: Gauges) -> None:
    """Count a runtime's live CLI processes and queued requests while it is open; and
    look up again whether the environment names a provider (a turn does not)."""
    global _runtimes
    if API_VERSION is not None:
        _resolved.runtime_opened()
    _runtimes = (*(ref for ref in _runtimes if ref() is not None), weakref.ref(gauges))


def _open_runtimes() -> Iterator[Gauges]:
    for ref in _runtimes:
        gauges = ref()
        if gauges is not None and not gauges.closed:
            yield gauges


# Called by the SDK's metric reader: the API's metrics are imported by then.


def _observe_processes(_: CallbackOptions) -> Iterable[Observation]:
    from opentelemetry.metrics import Observation

    return [Observation(sum(g.live_processes() for g in _open_runtimes()))]


def _observe_queued(_: CallbackOptions) -> Iterable[Observation]:
    from opentelemetry.metrics import Observation

    queued: dict[str, int] = {}
    for gauges in _open_runtimes():
        for name, count in gauges.queued():
            queued[name] = queued.get(name, 0) + count
    return [Observation(count, {AGENT: name}) for name, count in queued.items()]


def _observe_budgets(_: CallbackOptions) -> Iterable[Observation]:
    from opentelemetry.metrics import Observation

    return [
        Observation(left, {AGENT: name})
        for gauges in _open_runtimes()
        for name, left in gauges.budgets_left()
    ]


# The instruments, by name: (unit, description). Observable ones are read from the open
# runtimes when the SDK collects.
_COUNTERS = {
    "agentrt.turns": ("{turn}", "Turns ended, by stop reason"),
    "agentrt.cost": ("{USD}", "What turns cost, as the CLI reported"),
    "agentrt.restarts": ("{restart}", "Supervisor restarts"),
    "agentrt.reaped": ("{process_group}", "Process groups of dead runtimes reaped"),
    "agentrt.warm.hits": ("{turn}", "Turns served by a live CLI kept from the previous turn"),
    "agentrt.warm.misses": ("{turn}", "Turns of a keep-alive agent that had to start a CLI"),
    "agentrt.budget.refused": ("{request}", "Requests refused because a budget was spent"),
}
_HISTOGRAMS = {
    "agentrt.turn.duration": ("s", "A turn, from start to outcome"),
    "agentrt.turn.time_to_first_event": ("s", "From a turn's start to its first content event"),
    # The GenAI semantic conventions' client token usage.
    "gen_ai.client.token.usage": ("{token}", "Tokens used per turn"),
}
_OBSERVED = {
    "agentrt.processes.live": (_observe_processes, "{process}", "CLI processes of running turns"),
    "agentrt.requests.queued": (_observe_queued, "{request}", "Requests in agents' mailboxes"),
    "agentrt.budget.remaining": (
        _observe_budgets,
        "{USD}",
        "What is left of each agent's tightest USD budget",
    ),
}


@attrs.frozen
class _Instruments:
    counters: Mapping[str, metrics.Counter]
    histograms: Mapping[str, metrics.Histogram]

    @classmethod
    def create(cls, meter: metrics.Meter) -> _Instruments:
        for name, (callback, unit, description) in _OBSERVED.items():
            meter.create_observable_up_down_counter(
                name, [callback], unit=unit, description=description
            )
        return cls(
            {
                name: meter.create_counter(name, unit=unit, description=description)
                for name, (unit, description) in _COUNTERS.items()
            },
            {
                name: meter.create_histogram(name, unit=unit, description=description)
                for name, (unit, description) in _HISTOGRAMS.items()
            },
        )


def count_budget_refusal(agent: str, backend: str) -> None:
    """Count one request refused because a budget of its agent was spent."""
    instruments = _instruments()
    if instruments is not None:
        instruments.counters["agentrt.budget.refused"].add(1, {AGENT: agent, BACKEND: backend})


def record_warm_process(agent: str, backend: str, *, hit: bool) -> None:
    """Count one turn of a keep-alive agent: ``hit`` if a live CLI process served it,
    else a miss (the turn started a CLI: the first turn, or after an anomaly ended one)."""
    instruments = _instruments()
    if instruments is not None:
        name = "agentrt.warm.hits" if hit else "agentrt.warm.misses"
        instruments.counters[name].add(1, {AGENT: agent, BACKEND: backend})


################################################################
# Spans
################################################################


def capture_context() -> object:
    """The caller's OpenTelemetry context (None without the API, or before anything has
    imported its contexts: none can be current then): its current span is the parent of
    the turn a request runs."""
    loaded = sys.modules.get("opentelemetry.context")
    return None if loaded is None else loaded.get_current()


class TracedProcess(Protocol):
    """What a turn's span reads of its CLI process, at the end: how it exited, and how
    many processes of its tree had to be killed."""

    @property
    def pid(self) -> int: ...

    @property
    def exit_status(self) -> ExitStatus | None: ...

    @property
    def killed(self) -> int: ...


@attrs.define(eq=False)
class TurnTrace:
    """One turn's span and measurements; made by `start`, which returns None when nothing
    records (then no hook costs more than its ``is not None``)."""

    _span: Span
    _instruments: _Instruments | None
    _agent: str
    _backend: str
    _started: float
    _first_event: bool = False
    _stopped: bool = False
    _process: TracedProcess | None = None
    _ended: bool = False

    @classmethod
    def start(
        cls, parent: object, agent: str, backend: str, session_id: str | None
    ) -> TurnTrace | None:
        if API_VERSION is None:
            return None
        # _tracer() and _instruments() inlined: this is every turn's.
        tracer, instruments = _resolved.current_tracer(), _resolved.current_instruments()
        if tracer is None and instruments is None:
            return None
        from opentelemetry import context as otel_context
        from opentelemetry import trace

        span: Span = trace.INVALID_SPAN
        if tracer is not None:
            attributes = {OPERATION: _INVOKE_AGENT, AGENT: agent, BACKEND: backend}
            if session_id is not None:
                attributes[CONVERSATION] = session_id
            span = tracer.start_span(
                f"{_INVOKE_AGENT} {agent}",
                context=parent if isinstance(parent, otel_context.Context) else None,
                kind=trace.SpanKind.CLIENT,
                attributes=attributes,
            )
        return cls(span, instruments, agent, backend, trio.current_time())

    def spawned(self, process: TracedProcess) -> None:
        self._process = process
        self._span.add_event("agentrt.spawn", {"process.pid": process.pid})

    def first_event(self) -> None:
        if self._first_event:
            return
        self._first_event = True
        elapsed = trio.current_time() - self._started
        self._span.add_event("agentrt.first_event", {"agentrt.time_to_first_event": elapsed})
        if self._instruments is not None:
            histogram = self._instruments.histograms["agentrt.turn.time_to_first_event"]
            histogram.record(elapsed, {BACKEND: self._backend})

    def cli_version(self, version: str) -> None:
        """The version the turn's CLI reported (or its version_command printed)."""
        self._span.set_attribute(CLI_VERSION, version)

    def stopping(self, reason: StopReason) -> None:
        # Only the first stop takes effect (Turn.stop).
        if not self._stopped:
            self._stopped = True
            self._span.add_event("agentrt.interrupt", {STOP_REASON: reason.value})

    def end(self, outcome: Response | TurnFailed) -> None:
        """The turn's outcome: the span's attributes and status, the metrics."""
        self._ended = True
        span = self._span
        if isinstance(outcome, Response):
            failed, reason, exit_status = False, outcome.stop_reason, None
        else:
            failed, reason, exit_status = True, outcome.reason, outcome.exit_status
        if exit_status is None and self._process is not None:
            exit_status = self._process.exit_status
        killed = self._process.killed if self._process is not None else 0
        if span.is_recording():
            attributes: dict[str, Any] = {STOP_REASON: reason.value}
            if outcome.session_id is not None:
                attributes[CONVERSATION] = outcome.session_id
            if exit_status is not None:
                if exit_status.returncode is not None:
                    attributes["process.exit.code"] = exit_status.returncode
                if exit_status.signal is not None:
                    attributes["agentrt.process.signal"] = exit_status.signal
            if outcome.usage is not None:
                usage = outcome.usage
                attributes[INPUT_TOKENS] = usage.input_tokens
                attributes[OUTPUT_TOKENS] = usage.output_tokens
                attributes[CACHE_READ_TOKENS] = usage.cache_read_input_tokens
                attributes[CACHE_CREATION_TOKENS] = usage.cache_creation_input_tokens
            if outcome.cost_usd is not None:
                attributes["agentrt.cost_usd"] = outcome.cost_usd
            if isinstance(outcome, Response):
                coverage = outcome.event_coverage
                attributes["agentrt.events.retained"] = coverage.retained
                attributes["agentrt.events.omitted"] = coverage.omitted
                if outcome.model is not None:
                    attributes[MODEL] = outcome.model
            attributes["agentrt.processes.killed"] = killed
            span.set_attributes(attributes)
            if killed:
                span.add_event("agentrt.kill", {"agentrt.processes.killed": killed})
            if reason is StopReason.SESSION_LOST:
                lost = {CONVERSATION: outcome.session_id} if outcome.session_id else {}
                span.add_event("agentrt.session_lost", lost)
            if failed:
                # The reason only: a failure's message may quote the CLI's output.
                span.set_attribute(ERROR_TYPE, reason.value)
                span.set_status(_error(reason.value))
        span.end()
        self._measure(reason, outcome)

    def close(self) -> None:
        """End the span if `end` was not reached (the actor was stopped mid-turn)."""
        if not self._ended:
            self._ended = True
            self._span.set_attributes(
                {STOP_REASON: StopReason.CANCELLED.value, ERROR_TYPE: "agent_stopped"}
            )
            self._span.set_status(_error("agent_stopped"))
            self._span.end()
            self._measure(StopReason.CANCELLED, None)

    def _measure(self, reason: StopReason, outcome: Response | TurnFailed | None) -> None:
        instruments = self._instruments
        if instruments is None:
            return
        by_reason = {BACKEND: self._backend, STOP_REASON: reason.value}
        instruments.counters["agentrt.turns"].add(1, by_reason)
        elapsed = trio.current_time() - self._started
        instruments.histograms["agentrt.turn.duration"].record(elapsed, by_reason)
        if outcome is None:
            return
        agent = {AGENT: self._agent, BACKEND: self._backend}
        if outcome.usage is not None:
            usage = outcome.usage
            base = {**agent, OPERATION: _INVOKE_AGENT}
            tokens = instruments.histograms["gen_ai.client.token.usage"]
            tokens.record(usage.input_tokens, {**base, TOKEN_TYPE: "input"})
            tokens.record(usage.output_tokens, {**base, TOKEN_TYPE: "output"})
        if outcome.cost_usd is not None:
            instruments.counters["agentrt.cost"].add(outcome.cost_usd, agent)


@contextmanager
def restart_span(
    agent: str, affected: Iterable[str], delay: float, restarts: int
) -> Iterator[None]:
    """A span over one supervisor restart (its backoff and the new instances' start) of
    ``agent`` and the siblings its strategy restarts with it. Not made current: the new
    instances' tasks must not inherit it."""
    with _span("agentrt.restart") as span:
        span.set_attributes(
            {
                AGENT: agent,
                "agentrt.restart.agents": list(affected),
                "agentrt.restart.delay": delay,
                "agentrt.restart.count": restarts,
            }
        )
        yield
    instruments = _instruments()
    if instruments is not None:
        instruments.counters["agentrt.restarts"].add(1, {AGENT: agent})


@contextmanager
def reap_span(agent: str, pgid: int, dead_runtime: str) -> Iterator[dict[str, bool]]:
    """A span over reaping one process group a dead runtime left; the caller sets
    ``["killed"]`` in what it yields (whether anything still ran)."""
    result = {"killed": False}
    with _span("agentrt.reap") as span:
        yield result
        span.set_attributes(
            {
                AGENT: agent,
                "agentrt.reap.pgid": pgid,
                "agentrt.reap.runtime_id": dead_runtime,
                "agentrt.reap.killed": result["killed"],
            }
        )
    instruments = _instruments()
    if instruments is not None:
        instruments.counters["agentrt.reaped"].add(1, {"agentrt.reap.killed": result["killed"]})


def _error(description: str) -> Status:
    """An error status, for a span: only a recording turn's (the API is imported by then)."""
    from opentelemetry.trace import Status, StatusCode

    return Status(StatusCode.ERROR, description)


class _NoSpan:
    """Stands in for a span where nothing records (also without the API)."""

    def set_attributes(self, attributes: Mapping[str, Any]) -> None:
        pass


@contextmanager
def _span(name: str) -> Iterator[Span | _NoSpan]:
    # A span of its own, ended however the block ends (an exception marks it failed).
    tracer = _tracer()
    if tracer is None:
        yield _NoSpan()
        return
    span = tracer.start_span(name)
    try:
        yield span
    except BaseException as exc:
        span.set_attribute(ERROR_TYPE, type(exc).__name__)
        span.set_status(_error(type(exc).__name__))
        raise
    finally:
        span.end()

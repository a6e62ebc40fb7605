"""The console's ASGI application: the pages, their live streams and the actions, behind
the `Gate`. Everything is read through the runtime's public calls and the store's
capabilities; nothing of a prompt or an answer is logged."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, parse_qsl, urlencode

import trio

from .._budget_spending import budgets_data, spent_by_key
from .._errors import AgentRTError, AgentStopped
from .._requests import Completed, Failed, Ref
from .._status import AgentStatus
from .._stream import EventStream
from ._desk import decide, pending
from ._fleet import fleet, store_state
from ._gate import Gate
from ._history import history
from ._http import (
    BadBody,
    EventSink,
    Receive,
    Scope,
    Send,
    answer,
    answer_json,
    event_stream,
    read_body,
    sent_whole,
)
from ._pages import page
from ._queue import queued
from ._shown import event_data, record_data, shown, status_data

if TYPE_CHECKING:
    from .._runtime import Runtime
    from .._stores._protocols import BudgetStore, SessionStore

logger = logging.getLogger("agentrt.console")

# How often a live page is brought up to date from the store and the statuses.
REFRESH = 1.0
KEEPALIVE = 15.0
_STATIC = {
    "/static/console.js": b"text/javascript; charset=utf-8",
    "/static/console.css": b"text/css; charset=utf-8",
}
# Events of one turn waiting for a slow page before further ones are dropped.
RELAY = 10_000
# Why a routed stream skipped events: its reads fell behind the owner's ring of them.
_OWNER_DROPPED = "the owner's buffer for readers on other runtimes overflowed"
# The actions on agents; "decide" answers a pending approval.
ACTIONS = ("ask", "tell", "interrupt", "halt", "unhalt", "stop", "reset_session", "withdraw")
# The tail of a stored transcript the agent page shows.
TRANSCRIPT_TAIL = 256 * 1024


class ConsoleApp:
    """The ASGI application of a console over ``runtime``."""

    def __init__(self, runtime: Runtime, gate: Gate) -> None:
        self._runtime = runtime
        self._gate = gate
        # The open agent pages' streams, by agent name: told of the requests this console
        # queues, so that they follow those from the start (a turn found through the
        # status is followed from when it is found).
        self._watchers: dict[str, set[Callable[[Ref], None]]] = {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return  # WebSocket and anything else: ended unserved
        send = sent_whole(send)
        root = scope.get("root_path", "")
        path = scope["path"].removeprefix(root) or "/"
        headers = scope["headers"]
        if not self._gate.admits(headers, scope["query_string"]):
            await answer(send, 401, b"")  # nothing, not even which token was missing
            return
        if self._gate.token and self._gate.from_query(scope["query_string"]):
            # The first visit: the token moves into a cookie and out of the address bar;
            # the rest of the query stays (a link to an agent's page keeps its name).
            cookie = (b"set-cookie", self._gate.cookie(root or "/"))
            target = (root + path + _without_token(scope["query_string"])).encode()
            await answer(send, 303, b"", headers=[cookie, (b"location", target)])
            return
        query = {k: v[-1] for k, v in parse_qs(scope["query_string"].decode()).items()}
        method = scope["method"]
        if method == "POST" and path == "/action":
            await self._action(scope, receive, send)
        elif method != "GET":
            await answer(send, 405, b"GET, or POST /action")
        elif path in ("/", "/agent"):
            body = page("fleet" if path == "/" else "agent", self._gate.csrf)
            await answer(send, 200, body, b"text/html; charset=utf-8")
        elif path in _STATIC:
            asset = resources.files(__package__).joinpath("static", path.rsplit("/", 1)[1])
            await answer(send, 200, asset.read_bytes(), _STATIC[path])
        elif path == "/events/fleet":
            await self._fleet_events(receive, send)
        elif path == "/events/agent" and "name" in query:
            await self._agent_events(query["name"], receive, send)
        elif path == "/transcript" and "name" in query:
            await self._transcript(query["name"], send)
        elif path == "/history":
            await self._history(query, send)
        else:
            await answer(send, 404, b"not found")

    async def _fleet_events(self, receive: Receive, send: Send) -> None:
        async with event_stream(receive, send) as sink:
            last: object = None
            quiet = 0.0
            while True:
                rows = [row.data() for row in await fleet(self._runtime)]
                data = {
                    "node": self._runtime.node,
                    "agents": rows,
                    "approvals": await pending(self._runtime.store_capabilities.approvals),
                }
                if data != last:
                    await sink.event("fleet", data)
                    last, quiet = data, 0.0
                elif (quiet := quiet + REFRESH) >= KEEPALIVE:
                    await sink.keepalive()
                    quiet = 0.0
                await trio.sleep(REFRESH)

    async def _agent_data(self, name: str) -> tuple[dict[str, Any], AgentStatus | None]:
        status: AgentStatus | None
        why: str | None
        owner_ended = False
        try:
            status = await self._runtime.status(name)
        except AgentRTError as exc:
            status, why = None, shown(str(exc))
            owner_ended = isinstance(exc, AgentStopped)
        else:
            why = None
        record = await self._runtime.store.load(name)
        stored_state = None
        if status is None:
            # No status to be had: the state the store tells, as the fleet page shows it.
            store = self._runtime.store_capabilities.leases
            leases = await store.leases() if store is not None else []
            lease = next((lease for lease in leases if lease.name == name), None)
            if record is not None or lease is not None:
                stored_state = store_state(
                    record, lease, store is not None, owner_ended=owner_ended
                )
            if stored_state == "stopped":
                why = None  # nothing is wrong: no runtime runs it, so none has its status
        data = {
            "name": name,
            "status": status_data(status),
            "budgets": await _budgets_of(
                self._runtime.store, self._runtime.store_capabilities.budgets, name
            ),
            "stored_state": stored_state,
            "queue": await queued(self._runtime.store_capabilities.requests, name),
            "unreachable": why,
            "record": record_data(record),
            "local": name in self._runtime.agents(),
        }
        return data, status

    async def _agent_events(self, name: str, receive: Receive, send: Send) -> None:
        async with event_stream(receive, send) as sink, trio.open_nursery() as nursery:
            followed: set[Ref] = set()

            async def follow(ref: Ref, stream: EventStream) -> None:
                await sink.event("turn", {"ref": str(ref.id)})
                await _relay(ref, stream, sink)

            def watch(ref: Ref) -> None:
                # Subscribed before the caller next yields: a turn that starts at once is
                # followed from its first event.
                if ref not in followed:
                    followed.add(ref)
                    with contextlib.suppress(AgentRTError):  # the agent stopped meanwhile
                        nursery.start_soon(follow, ref, self._runtime.stream(ref))

            watchers = self._watchers.setdefault(name, set())
            watchers.add(watch)
            try:
                await self._refresh_agent(name, sink, watch)
            finally:
                watchers.discard(watch)
                if not watchers:
                    del self._watchers[name]

    async def _refresh_agent(
        self, name: str, sink: EventSink, watch: Callable[[Ref], None]
    ) -> None:
        last: object = None
        while True:
            data, status = await self._agent_data(name)
            if data != last:
                await sink.event("agent", data)
                last = data
            current = None if status is None else status.current
            # An agent another runtime owns too: its stream is read through the routing.
            if current is not None:
                watch(current.ref)
            await trio.sleep(REFRESH / 4 if data["local"] else REFRESH)

    async def _transcript(self, name: str, send: Send) -> None:
        store = self._runtime.store_capabilities.transcripts
        if store is None:
            await answer_json(send, 200, {"lines": None, "why": "the store keeps no transcripts"})
            return
        transcript = await store.load_transcript(name)
        if transcript is None:
            await answer_json(send, 200, {"lines": None, "why": "no stored transcript"})
            return
        tail = transcript.data[-TRANSCRIPT_TAIL:].decode("utf-8", "replace").splitlines()
        if len(transcript.data) > TRANSCRIPT_TAIL:
            tail = tail[1:]  # the first line of a tail is cut
        lines = [shown(line) for line in tail if line]
        await answer_json(send, 200, {"lines": lines, "session_id": transcript.session_id})

    async def _history(self, query: dict[str, str], send: Send) -> None:
        offset = query.get("offset", "0")
        if not (offset.isascii() and offset.isdigit()) or len(offset) > 9:
            message = f"offset must be a count of entries (0 or more), not {shown(offset)!r}"
            await answer_json(send, 400, {"error": "BadRequest", "message": message})
            return
        data = await history(
            self._runtime.store_capabilities.turn_history, query.get("name"), int(offset)
        )
        await answer_json(send, 200, data)

    async def _action(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._gate.csrf_ok(scope["headers"]) or not _same_origin(scope):
            refusal = {"error": "CSRF", "message": "actions come from this console's pages"}
            await answer_json(send, 403, refusal)
            return
        try:
            request = json.loads(await read_body(receive))
        except (BadBody, ValueError) as exc:
            await answer_json(send, 400, {"error": "BadRequest", "message": str(exc)})
            return
        if isinstance(request, dict) and request.get("action") == "decide":
            await self._decide(request, send)
            return
        if (
            not isinstance(request, dict)
            or request.get("action") not in ACTIONS
            or not isinstance(request.get("name"), str)
        ):
            actions = ", ".join(ACTIONS)
            message = f"a JSON object with a name and an action, one of {actions} (or decide)"
            await answer_json(send, 400, {"error": "BadRequest", "message": message})
            return
        name, action = request["name"], request["action"]
        logger.info("console action %s on agent %r", action, name)  # never the prompt
        try:
            result = await self._act(name, action, request)
        except (AgentRTError, ValueError, TypeError) as exc:
            data = {"error": type(exc).__name__, "message": shown(str(exc))}
            await answer_json(send, 409, data)
            return
        await answer_json(send, 200, {"ok": True, **result})

    async def _decide(self, request: dict[str, Any], send: Send) -> None:
        logger.info("console decision on approval %r", request.get("id"))
        try:
            await decide(self._runtime.store_capabilities.approvals, request)
        except (AgentRTError, ValueError) as exc:
            status = 400 if isinstance(exc, ValueError) else 409
            await answer_json(send, status, {"error": type(exc).__name__, "message": str(exc)})
            return
        await answer_json(send, 200, {"ok": True})

    async def _act(self, name: str, action: str, request: dict[str, Any]) -> dict[str, Any]:
        rt = self._runtime
        if action == "withdraw":
            return {"withdrawn": await rt.withdraw(Ref(name, _ref_id(request.get("ref"))))}
        if action in ("ask", "tell"):
            prompt: Any = request.get("prompt")  # the tell refuses what is no prompt
            # The page's ask is a tell and its wait, so that the agent's open pages follow
            # the turn from its first event; a page that goes away leaves it running.
            ref = await rt.tell(name, prompt)
            for watch in list(self._watchers.get(name, ())):
                watch(ref)
            if action == "tell":
                return {"ref": str(ref.id)}
            settled = await rt.wait(ref)
            if isinstance(settled, Failed):
                raise settled.error
            if not isinstance(settled, Completed):
                raise AgentRTError(f"request #{ref.id} of agent {name!r}: {type(settled).__name__}")
            response = settled.response
            return {
                "ref": str(ref.id),
                "text": shown(response.text),
                "stop_reason": str(response.stop_reason),
                "cost_usd": response.cost_usd,
                "duration": response.duration,
            }
        if action == "interrupt":
            return {"interrupted": await rt.interrupt(name)}
        calls = {
            "halt": rt.halt,
            "unhalt": rt.unhalt,
            "stop": rt.stop_agent,
            "reset_session": rt.reset_session,
        }
        await calls[action](name)
        return {}


async def _relay(ref: Ref, stream: EventStream, sink: EventSink) -> None:
    """Hand a turn's events to a page without ever making the turn wait for it (a stream
    reader that falls behind would): past `RELAY` events not yet sent, events are dropped
    and the page is told how many. So is a gap in a routed stream (`EventStream.dropped`),
    and a routed stream's error ends the relay as an error event."""
    send_channel, receive_channel = trio.open_memory_channel[tuple[str, dict[str, Any]]](RELAY)
    dropped = 0

    def put(name: str, data: dict[str, Any]) -> None:
        nonlocal dropped
        try:
            send_channel.send_nowait((name, data))
        except trio.WouldBlock:
            dropped += 1

    async def drain() -> None:
        skipped = 0
        async with stream:
            with send_channel:
                try:
                    async for event in stream:
                        if stream.dropped != skipped:
                            gap = stream.dropped - skipped
                            skipped = stream.dropped
                            put("dropped", {"count": gap, "why": _OWNER_DROPPED})
                        put("event", event_data(event))
                except AgentRTError as exc:  # a routed stream's owner could not be read
                    failure = {"kind": "error", "reason": type(exc).__name__}
                    put("event", failure | {"message": shown(str(exc))})

    async with trio.open_nursery() as nursery:
        nursery.start_soon(drain)
        async for name, data in receive_channel:
            if dropped:
                await sink.event("dropped", {"ref": str(ref.id), "count": dropped})
                dropped = 0
            await sink.event(name, {"ref": str(ref.id), **data})


def _ref_id(ref: object) -> int:
    """A withdraw's ref: its id as an int, or in decimal as the page sends it (a page's
    numbers are exact to 53 bits only, a stored request's id has 62)."""
    if isinstance(ref, str) and ref.isascii() and ref.isdecimal() and len(ref) <= 20:
        return int(ref)
    if isinstance(ref, int) and not isinstance(ref, bool):
        return ref
    raise ValueError(
        f"withdraw takes the queued request's ref (an int, or it in decimal), not {ref!r}"
    )


def _without_token(query_string: bytes) -> str:
    """The query, ``?``-prefixed, without its token ("" when nothing else is left)."""
    kept = [
        (key, value)
        for key, value in parse_qsl(query_string.decode("latin-1"), keep_blank_values=True)
        if key != "token"
    ]
    return "?" + urlencode(kept) if kept else ""


def _same_origin(scope: Scope) -> bool:
    """A browser names the page's origin on a POST: it must be this server's."""
    origins = [v for k, v in scope["headers"] if k == b"origin"]
    if not origins:
        return True  # not a browser's cross-site request (those carry Origin)
    hosts = [v for k, v in scope["headers"] if k == b"host"]
    return len(hosts) == 1 and origins[0] in (b"http://" + hosts[0], b"https://" + hosts[0])


async def _budgets_of(
    store: SessionStore, kept: BudgetStore | None, name: str
) -> list[dict[str, Any]]:
    """Every budget that applies to ``name``, as ``agentrt status`` shows it (none from a
    store that keeps no budgets: ``kept`` None)."""
    if kept is None:
        return []
    stored = await kept.budgets()
    chain = dict(stored).get(name, ())
    if not chain:
        return []
    records = {record.name: record for record in await store.list()}
    return budgets_data(chain, spent_by_key(stored, records))

"""One ACP agent process for one conversation, as agentrt's `LiveProtocol`.

The opening is ``initialize`` (agentrt offers the agent no file system and no terminal:
the agent uses its own tools); then, each on the answer to the one before,
``authenticate`` (if ``auth_method`` names one), and ``session/new`` or, for the session
agentrt checkpointed, ``session/load``. The process is ready when the session is. An agent
whose ``initialize`` answer does not offer ``loadSession`` cannot continue a session: the
turn fails with SESSION_LOST (so the agent's ``on_session_lost`` applies), as it does when
the agent refuses the load. What an agent replays of a loaded session comes before its
answer, and is not a turn's.

A turn is ``session/prompt``; the ``session/update`` notifications that come while it runs
go to an `AcpTranslator`, and the turn ends at the prompt's answer. ``session/cancel``
interrupts it (the agent then answers the prompt ``cancelled``). Between turns every
notification is control (available commands, modes), and so is every request the agent
makes: ``session/request_permission`` is a `ToolApproval` with ``approvals`` (allowed with
the agent's "allow once" option, denied with its "reject once"; ACP cannot carry a changed
input or a reason, so an ``Allow`` with ``updated_input`` is a denial), and is denied
without (or allowed, where the agent's options say so); any other request (files,
terminals, an agent's own extensions) is answered "method not found".
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from acp.meta import PROTOCOL_VERSION
from acp.schema import (
    AllowedOutcome,
    AuthenticateRequest,
    CancelNotification,
    ClientCapabilities,
    DeniedOutcome,
    FileSystemCapabilities,
    Implementation,
    InitializeRequest,
    InitializeResponse,
    LoadSessionRequest,
    NewSessionRequest,
    NewSessionResponse,
    PermissionOption,
    PromptRequest,
    RequestPermissionRequest,
    RequestPermissionResponse,
    TextContentBlock,
)

from agentrt.backend import (
    Allow,
    Answers,
    Command,
    Deny,
    FrameRole,
    ProtocolError,
    SessionTotals,
    StopReason,
    ToolApproval,
    ToolRequest,
    child_env,
)

from . import _wire as w
from ._options import AcpOptions
from ._translate import AcpTranslator

_CLIENT = Implementation(name="agentrt", version="0")
# What a permission request gets without approve_tool (unless the agent's options say
# otherwise): nobody is there to ask.
_DENIED = Deny("no approve_tool")
_CAPABILITIES = ClientCapabilities(
    fs=FileSystemCapabilities(read_text_file=False, write_text_file=False), terminal=False
)


def agent_command(options: AcpOptions, environ: Mapping[str, str] | None) -> Command:
    """The agent's process: its argv, the child environment of the env policy with ``env``
    over it, its cwd."""
    env = child_env(options.env_policy, options.env, environ=environ)
    return Command(argv=options.command, env=env, cwd=options.session_cwd)


class AcpLive:
    """The `agentrt.backend.LiveProtocol` of one ACP agent process ``command``: build it
    with `AcpBackend.live` (or a backend of a CLI with an ACP mode, as opencode's).
    ``session_id`` is the session to load (None: a new one) in ``session_cwd``;
    ``auth_method`` an ``authenticate`` method to call first. Without ``approvals`` a
    permission request is answered by ``unasked``: denied, unless the agent's options say
    that what it asks runs unasked (opencode's ``auto``)."""

    def __init__(
        self,
        command: Command,
        *,
        session_id: str | None,
        session_cwd: str,
        auth_method: str | None = None,
        approvals: bool = False,
        unasked: Allow | Deny = _DENIED,
    ) -> None:
        self._session_cwd = session_cwd
        self._auth_method = auth_method
        self._approvals = approvals
        self._unasked = unasked
        self._load = session_id
        self._session_id: str | None = None
        self._command = command
        self._ids = itertools.count()
        self._pending: dict[int, str] = {}
        self._version: str | None = None
        self._agent: Any = None
        self._prompt_id: int | None = None

    @property
    def command(self) -> Command:
        """The agent's command line (``AcpOptions.command``)."""
        return self._command

    @property
    def ready(self) -> bool:
        """Whether the session is open (new, or loaded)."""
        return self._session_id is not None

    def opening(self) -> bytes:
        """``initialize``; the rest of the handshake follows its answer."""
        message = InitializeRequest(
            protocol_version=PROTOCOL_VERSION,
            client_capabilities=_CAPABILITIES,
            client_info=_CLIENT,
        )
        return self._request(w.INITIALIZE, message)

    def classify(self, frame: Any) -> FrameRole:
        """The prompt's answer ends the turn; the running turn's session updates are its
        events; everything else is control."""
        in_turn = self._prompt_id is not None
        if not isinstance(frame, Mapping):
            return "event" if in_turn else "control"  # the translator keeps it as raw
        if "method" in frame:
            if "id" in frame or not in_turn or frame.get("method") != w.SESSION_UPDATE:
                return "control"
            update = frame.get("params")
            session = update.get("sessionId") if isinstance(update, Mapping) else None
            return "event" if session == self._session_id else "control"
        if in_turn and frame.get("id") == self._prompt_id:
            self._prompt_id = None
            return "end"
        return "control"

    def control(self, frame: Any) -> bytes | ToolApproval:
        """Take an answer to the handshake or a request of the agent's; raises
        `ProtocolError` for an answer the conversation cannot go on after."""
        if not isinstance(frame, Mapping):
            return b""
        method = frame.get("method")
        if method is not None:
            if "id" not in frame:
                return b""  # a notification outside a turn: a load's replay, commands, modes
            if method == w.REQUEST_PERMISSION:
                return self._permission(frame)
            return w.refusal(frame.get("id"), method)
        request_id = frame.get("id")
        asked = self._pending.pop(request_id, None) if isinstance(request_id, int) else None
        if asked is None:
            return b""  # the answer to a prompt a stopped turn no longer reads
        error = frame.get("error")
        if asked == w.SESSION_LOAD and error is not None:
            why = w.error_text(error)
            raise ProtocolError(
                f"the agent could not load session {self._load}: {why}",
                reason=StopReason.SESSION_LOST,
            )
        if error is not None:
            reason = (
                StopReason.AUTHENTICATION_FAILED
                if asked == w.AUTHENTICATE
                else StopReason.MALFORMED_OUTPUT
            )
            raise ProtocolError(f"the agent refused {asked}: {w.error_text(error)}", reason=reason)
        answer = frame.get("result")
        if asked == w.INITIALIZE:
            return self._initialized(w.parsed(InitializeResponse, answer, "initialize answer"))
        if asked == w.AUTHENTICATE:
            return self._open_session()
        if asked == w.SESSION_NEW:
            self._session_id = w.parsed(NewSessionResponse, answer, "session/new answer").session_id
        elif asked == w.SESSION_LOAD:
            self._session_id = self._load
        return b""

    def prompt(self, text: str) -> bytes:
        """``session/prompt`` with ``text`` on the session; nothing if no session opened
        (the agent ended during its handshake: the turn reads and classifies that end)."""
        if self._session_id is None:
            return b""
        message = PromptRequest(
            session_id=self._session_id, prompt=[TextContentBlock(type="text", text=text)]
        )
        self._prompt_id = request_id = next(self._ids)
        return w.request(request_id, w.SESSION_PROMPT, message)

    def interrupt(self) -> bytes:
        """``session/cancel`` of the running turn (b"" between turns)."""
        if self._prompt_id is None or self._session_id is None:
            return b""
        return w.notification(w.SESSION_CANCEL, CancelNotification(session_id=self._session_id))

    def translator(self, *, baseline: SessionTotals | None = None) -> AcpTranslator:
        """A fresh translator for the next turn on this session (the usage an agent
        reports is the turn's own: ``baseline`` is not needed). With no session open (the
        agent ended during its handshake) it has none to report."""
        return AcpTranslator(session_id=self._session_id, version=self._version, agent=self._agent)

    def _initialized(self, answer: InitializeResponse) -> bytes:
        if answer.agent_info is not None:
            self._version = answer.agent_info.version
            self._agent = w.params(answer.agent_info)
        capabilities = answer.agent_capabilities
        if self._load is not None and not (capabilities and capabilities.load_session):
            raise ProtocolError(
                f"the agent cannot load session {self._load}: its initialize answer does not "
                "offer loadSession",
                reason=StopReason.SESSION_LOST,
            )
        if self._auth_method is not None:
            return self._request(w.AUTHENTICATE, AuthenticateRequest(method_id=self._auth_method))
        return self._open_session()

    def _open_session(self) -> bytes:
        cwd = self._session_cwd
        if self._load is None:
            return self._request(w.SESSION_NEW, NewSessionRequest(cwd=cwd, mcp_servers=[]))
        load = LoadSessionRequest(session_id=self._load, cwd=cwd, mcp_servers=[])
        return self._request(w.SESSION_LOAD, load)

    def _permission(self, frame: Mapping[str, Any]) -> bytes | ToolApproval:
        request_id = frame.get("id")
        asked = w.parsed(RequestPermissionRequest, frame.get("params"), "permission request")
        options = asked.options

        def answer(decision: Allow | Deny | Answers) -> bytes:
            # ACP cannot run a tool with another input than the one it asked about, and
            # asks no typed question (`Answers` to it is a refusal).
            allowed = isinstance(decision, Allow) and decision.updated_input is None
            chosen = _option(options, "allow_once" if allowed else "reject_once")
            outcome: AllowedOutcome | DeniedOutcome
            if chosen is None:
                outcome = DeniedOutcome(outcome="cancelled")
            else:
                outcome = AllowedOutcome(outcome="selected", option_id=chosen.option_id)
            return w.result(request_id, RequestPermissionResponse(outcome=outcome))

        if not self._approvals:
            return answer(self._unasked)
        call = asked.tool_call
        tool_input = call.raw_input if call.raw_input else {"title": call.title}
        request = ToolRequest(call.kind or "other", tool_input, call.tool_call_id)
        return ToolApproval(request=request, answer=answer)

    def _request(self, method: str, message: Any) -> bytes:
        request_id = next(self._ids)
        self._pending[request_id] = method
        return w.request(request_id, method, message)


def _option(options: list[PermissionOption], kind: str) -> PermissionOption | None:
    """The agent's option of ``kind``, else its option of the same verdict for always
    (``allow_always`` for ``allow_once``): an agent may offer only one of the two."""
    verdict = kind.split("_", 1)[0]
    exact = [o for o in options if o.kind == kind]
    same = [o for o in options if o.kind.startswith(verdict)]
    found = exact or same
    return found[0] if found else None

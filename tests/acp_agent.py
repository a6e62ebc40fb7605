"""A fake ACP agent for the acp backend's tests: the ``agent-client-protocol`` package's own
agent side (asyncio, over stdio), answering prompts from a script in the prompt's text.

- ``hang``: no answer until the client cancels the turn (then ``cancelled``);
- ``shell: COMMAND``: asks permission for an ``execute`` tool; allowed, runs COMMAND in a
  shell (a tool process of the turn) and says "done"; denied, says "denied";
- anything else: "you said: PROMPT; before: EARLIER|PROMPTS" (the session's history).

Sessions are kept as files under ``$FAKE_ACP_DIR``, so another process loads them.
``FAKE_ACP_NO_LOAD=1``: the initialize answer does not offer ``loadSession``.
"""

from __future__ import annotations

import asyncio
import json
import os
import uuid
from pathlib import Path
from typing import Any

from acp import (
    PROTOCOL_VERSION,
    Agent,
    InitializeResponse,
    LoadSessionResponse,
    NewSessionResponse,
    PromptResponse,
    RequestError,
    run_agent,
    start_tool_call,
    text_block,
    tool_content,
    update_agent_message_text,
    update_tool_call,
)
from acp.interfaces import Client
from acp.schema import AgentCapabilities, Implementation, PermissionOption

STORE = Path(os.environ["FAKE_ACP_DIR"])


class FakeAgent(Agent):
    def __init__(self) -> None:
        self._client: Client | None = None
        self._cancelled: dict[str, asyncio.Event] = {}

    def on_connect(self, conn: Client) -> None:
        self._client = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        can_load = os.environ.get("FAKE_ACP_NO_LOAD") != "1"
        return InitializeResponse(
            protocol_version=PROTOCOL_VERSION,
            agent_capabilities=AgentCapabilities(load_session=can_load),
            agent_info=Implementation(name="fake-acp", version="1.2.3"),
        )

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        session_id = str(uuid.uuid4())
        (STORE / session_id).write_text("[]")
        return NewSessionResponse(session_id=session_id)

    async def load_session(self, cwd: str, session_id: str, **kwargs: Any) -> LoadSessionResponse:
        if not (STORE / session_id).exists():
            raise RequestError.invalid_params({"details": f"no session {session_id}"})
        return LoadSessionResponse()

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self._cancelled.setdefault(session_id, asyncio.Event()).set()

    async def prompt(self, prompt: list[Any], session_id: str, **kwargs: Any) -> PromptResponse:
        assert self._client is not None
        text = "".join(block.text for block in prompt)
        history = json.loads((STORE / session_id).read_text())
        (STORE / session_id).write_text(json.dumps([*history, text]))
        cancelled = self._cancelled[session_id] = asyncio.Event()
        if text == "hang":
            await cancelled.wait()
            return PromptResponse(stop_reason="cancelled")
        if text.startswith("shell: "):
            return await self._shell(session_id, text.removeprefix("shell: "), cancelled)
        reply = f"you said: {text}; before: {'|'.join(history)}"
        await self._say(session_id, reply)
        return PromptResponse(stop_reason="end_turn")

    async def _shell(
        self, session_id: str, command: str, cancelled: asyncio.Event
    ) -> PromptResponse:
        assert self._client is not None
        call = f"call-{uuid.uuid4().hex[:8]}"
        await self._client.session_update(
            session_id,
            start_tool_call(
                call, command, kind="execute", status="pending", raw_input={"command": command}
            ),
        )
        options = [
            PermissionOption(option_id="yes", name="Allow", kind="allow_once"),
            PermissionOption(option_id="no", name="Reject", kind="reject_once"),
        ]
        asked = await self._client.request_permission(
            session_id=session_id,
            tool_call=update_tool_call(call, title=command, kind="execute"),
            options=options,
        )
        if getattr(asked.outcome, "option_id", None) != "yes":
            await self._client.session_update(session_id, update_tool_call(call, status="failed"))
            await self._say(session_id, "denied")
            return PromptResponse(stop_reason="end_turn")
        process = await asyncio.create_subprocess_shell(
            command, stdout=asyncio.subprocess.PIPE, start_new_session=True
        )
        ran = asyncio.ensure_future(process.communicate())
        stop = asyncio.ensure_future(cancelled.wait())
        await asyncio.wait({ran, stop}, return_when=asyncio.FIRST_COMPLETED)
        if not ran.done():
            return PromptResponse(stop_reason="cancelled")
        output = ran.result()[0].decode()
        await self._client.session_update(
            session_id,
            update_tool_call(call, status="completed", content=[tool_content(text_block(output))]),
        )
        await self._say(session_id, "done")
        return PromptResponse(stop_reason="end_turn")

    async def _say(self, session_id: str, text: str) -> None:
        assert self._client is not None
        words = text.split(" ")
        for i, word in enumerate(words):
            chunk = word if i == len(words) - 1 else f"{word} "
            await self._client.session_update(session_id, update_agent_message_text(chunk))


if __name__ == "__main__":
    asyncio.run(run_agent(FakeAgent()))

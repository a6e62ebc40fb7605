"""The demo's scripted model: what it answers to each prompt, served either by the fake
Anthropic API (to the real ``claude`` binary) or as programs for the bundled fake CLI.

The prompts are plain requests a real model answers too, so ``agentrt demo --backend
claude`` sends the same ones.
"""

from __future__ import annotations

import json
import os
import re
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ..testing import (
    AnthropicHang,
    AnthropicReply,
    AnthropicText,
    AnthropicToolUse,
    RecordedRequest,
    fake_cli_executable,
)

HANG_PROMPT = "Write a 3000-word essay on the history of process supervision."
REMEMBER_PROMPT = "Remember the number 42 for later. Reply with 'Noted.'"
MIGRATE_PROMPT = (
    "Run the nightly migration: use the Bash tool to run "
    "`echo migrating; sleep 30; echo done`, then reply 'migrated'."
)
RECALL_PROMPT = "What number did I ask you to remember? Answer with the number only."
JOBS = (
    "the invoices module",
    "the login page",
    "the nightly export",
    "the search index",
    "the billing webhooks",
    "the audit log",
    "the image resizer",
    "the email templates",
    "the rate limiter",
)


def job_prompt(number: int) -> str:
    return f"Job {number}: check {JOBS[(number - 1) % len(JOBS)]} and report in one sentence."


_JOB = re.compile(r"^Job (\d+): check (.+?) and report")
_REMEMBER = re.compile(r"Remember the number (\d+)")


@attrs.frozen
class Say:
    text: str


@attrs.frozen
class UseTool:
    """Say ``text``, run ``command`` in the Bash tool, then answer ``then``."""

    text: str
    command: str
    then: str
    output: str  # what the fake CLI reports the command printed
    seconds: float  # how long the fake CLI pretends the command runs


@attrs.frozen
class Hang:
    """Never answer (the watchdog's case)."""


Reply = Say | UseTool | Hang


def reply(prompt: str, history: Sequence[str], *, tool_seconds: float) -> Reply:
    """The scripted answer to ``prompt``; ``history`` is the session's earlier user texts."""
    if job := _JOB.match(prompt):
        thing = job.group(2)
        return UseTool(
            text=f"Checking {thing}.",
            command=f"echo 'checking {thing}'; sleep {tool_seconds:g}",
            then=f"Job {job.group(1)} done: {thing} looks healthy.",
            output=f"checking {thing}",
            seconds=tool_seconds,
        )
    if prompt == HANG_PROMPT:
        return Hang()
    if prompt == REMEMBER_PROMPT:
        return Say("Noted.")
    if prompt == MIGRATE_PROMPT:
        if MIGRATE_PROMPT in history:  # asked again after the crash: do not hang again
            return Say("The migration was cut short last time; it is done now. migrated")
        return UseTool(
            text="Starting the migration.",
            command="echo migrating; sleep 30; echo done",
            then="migrated",
            output="migrating",
            seconds=30.0,
        )
    if prompt == RECALL_PROMPT:
        # The answer is only as good as the history the CLI sent: proof of a resumed session.
        for text in reversed(history):
            if found := _REMEMBER.search(text):
                return Say(found.group(1))
        return Say("You did not ask me to remember a number.")
    return Say(f"OK: {prompt}")


def anthropic_script(*, tool_seconds: float) -> Callable[[RecordedRequest], AnthropicReply]:
    """The fake API's answers: `reply` for each model call of the real CLI."""

    def answer(request: RecordedRequest) -> AnthropicReply:
        prompts = [t for t in request.texts("user") if not t.startswith("<system-reminder>")]
        if request.tool_results():
            # The CLI ran the tool and asks again: the answer after it, for the latest prompt.
            asked = next((p for p in reversed(prompts) if _script_prompt(p)), "")
            planned = reply(asked, prompts, tool_seconds=tool_seconds)
            return AnthropicText(planned.then if isinstance(planned, UseTool) else "Done.")
        prompt = request.last_user_text()
        planned = reply(prompt, prompts[:-1], tool_seconds=tool_seconds)
        if isinstance(planned, Hang):
            return AnthropicHang()
        if isinstance(planned, UseTool):
            command = {"command": planned.command, "description": planned.text}
            return AnthropicToolUse("Bash", command, text=planned.text)
        return AnthropicText(planned.text)

    return answer


def _script_prompt(text: str) -> bool:
    return bool(_JOB.match(text)) or text in (HANG_PROMPT, REMEMBER_PROMPT, MIGRATE_PROMPT)


@attrs.define
class FakeClaude:
    """A fake ``claude`` for one agent when the real binary is not installed: a bundled
    fake-CLI executable whose program `prepare` rewrites before each turn, from the same
    `reply` the fake API uses. It prints Claude Code's stream-json and ends on SIGINT as
    Claude does; it keeps no transcript, so the history comes from this object."""

    directory: str
    name: str
    tool_seconds: float
    binary: str = ""
    session_id: str = attrs.field(init=False)
    history: list[str] = attrs.field(factory=list)

    def __attrs_post_init__(self) -> None:
        self.session_id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"agentrt-demo/{self.name}"))
        self.binary = fake_cli_executable(self.directory, name=f"claude-{self.name}")

    def prepare(self, prompt: str) -> None:
        planned = reply(prompt, self.history, tool_seconds=self.tool_seconds)
        self.history.append(prompt)
        program = os.path.join(self.directory, f"claude-{self.name}.program.json")
        with open(program, "w") as f:
            json.dump(self._steps(planned), f)

    def _frame(self, kind: str, **fields: Any) -> list[Any]:
        return ["emit", {"type": kind, **fields, "session_id": self.session_id}]

    def _assistant(self, *content: dict[str, Any]) -> list[Any]:
        message = {"role": "assistant", "model": "fake-cli", "content": list(content)}
        return self._frame("assistant", message=message)

    def _steps(self, planned: Reply) -> list[list[Any]]:
        steps: list[list[Any]] = [
            ["on", "SIGINT", []],
            ["read_stdin"],
            self._frame("system", subtype="init", model="fake-cli"),
        ]
        if isinstance(planned, Hang):
            return [*steps, ["hang"]]
        answer = planned.text
        if isinstance(planned, UseTool):
            tool = {"type": "tool_use", "id": "toolu_fake", "name": "Bash"}
            result = {"type": "tool_result", "tool_use_id": "toolu_fake", "content": planned.output}
            steps += [
                self._assistant({"type": "text", "text": planned.text}),
                self._assistant({**tool, "input": {"command": planned.command}}),
                ["sleep", planned.seconds],
                self._frame("user", message={"role": "user", "content": [result]}),
            ]
            answer = planned.then
        usage = {"input_tokens": 120, "output_tokens": 30}
        steps += [
            ["sleep", 0.2],
            self._assistant({"type": "text", "text": answer}),
            self._frame(
                "result",
                subtype="success",
                is_error=False,
                result=answer,
                total_cost_usd=0.0006,
                usage=usage,
                num_turns=1,
            ),
        ]
        return steps

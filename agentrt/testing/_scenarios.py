"""The model's side of each example's story, for the fake-API runner's ``--scenario``: the
tool calls an example is about (a denied command, a blocked read, an application tool), so
they happen on the fake as they would with a real model.

A scenario answers from the request alone: which prompt this turn is for, and how many
tool results of this turn came back already. So it holds no state, and a resumed session
(whose earlier turns come back in each request) is answered the same way.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

from ._fake_anthropic import AnthropicReply, AnthropicText, AnthropicToolUse, RecordedRequest

# The answer to the step'th model call of a turn (0: the prompt's), given the request.
Step: TypeAlias = Callable[[RecordedRequest], AnthropicReply]
Scenario: TypeAlias = Callable[[RecordedRequest], AnthropicReply]

# Where Claude Code (2.1.332) tells the model its working directory: a system text, looked
# for anywhere in the request, so that a CLI which moves it elsewhere is still answered.
_CWD = re.compile(r"Primary working directory: ([^\n]+)")
_QUOTED = re.compile(r"'([^']+)'")
_REMINDER = "<system-reminder>"


def echo(request: RecordedRequest) -> AnthropicText:
    """The default answer: the prompt, echoed."""
    return AnthropicText(f"You said: {request.last_user_text()}")


def _blocks(message: Any) -> list[Mapping[str, Any]]:
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _turn(request: RecordedRequest) -> tuple[str, int]:
    """This turn's prompt, and how many tool results of this turn the request carries."""
    results = 0
    for message in reversed(request.messages):
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        blocks = _blocks(message)
        if any(b.get("type") == "tool_result" for b in blocks):
            results += 1
            continue
        texts = [b.get("text", "") for b in blocks if b.get("type") == "text"]
        if isinstance(message.get("content"), str):
            texts.append(message["content"])
        prompts = [str(t) for t in texts if not str(t).startswith(_REMINDER)]
        if prompts:
            return prompts[-1], results
    return "", results


def _cwd(request: RecordedRequest) -> str:
    found = _CWD.search(json.dumps(request.body).replace("\\n", "\n"))
    return found.group(1).strip() if found else "."


def _result_text(request: RecordedRequest) -> str:
    """The text of the last tool result the request carries."""
    texts: list[str] = []
    for block in request.tool_results():
        content = block.get("content")
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts += [str(b.get("text", "")) for b in content if isinstance(b, dict)]
    return "\n".join(texts)


def _last_tool_input(request: RecordedRequest) -> Mapping[str, Any]:
    """The input of the last tool call the model made in this conversation."""
    for message in reversed(request.messages):
        for block in reversed(_blocks(message)):
            found = block.get("input")
            if block.get("type") == "tool_use" and isinstance(found, dict):
                return found
    return {}


def _scenario(turns: Sequence[tuple[str, Sequence[Step]]]) -> Scenario:
    """Answer a turn whose prompt contains the key with its steps, one per model call; any
    other prompt, or a call past the last step, gets the echo."""

    def answer(request: RecordedRequest) -> AnthropicReply:
        prompt, step = _turn(request)
        for key, steps in turns:
            if key in prompt and step < len(steps):
                return steps[step](request)
        return echo(request)

    return answer


def _reply(reply: AnthropicReply) -> Step:
    return lambda _request: reply


def _read_git_config(request: RecordedRequest) -> AnthropicReply:
    return AnthropicToolUse("Read", {"file_path": os.path.join(_cwd(request), ".git", "config")})


_PROPOSE = AnthropicToolUse.mcp("agentrt", "propose_deletion", {"paths": ["build"]})

# examples/guarded.py: a deleting command (denied), the application tool instead, then a
# read of .git (blocked by the hook).
GUARDED = _scenario(
    [
        (
            "Clean up",
            [
                _reply(
                    AnthropicToolUse("Bash", {"command": "rm -rf build", "description": "Clean"})
                ),
                _reply(AnthropicToolUse.tool_search(_PROPOSE.name)),
                _reply(_PROPOSE),
                _reply(AnthropicText("Deleting was denied, so I proposed build for deletion.")),
            ],
        ),
        (
            ".git",
            [_read_git_config, _reply(AnthropicText("The hook blocked it: I left .git alone."))],
        ),
    ]
)


def _count_words(request: RecordedRequest) -> AnthropicReply:
    quoted = _QUOTED.search(_turn(request)[0])
    text = quoted.group(1) if quoted else _turn(request)[0]
    return AnthropicToolUse.mcp("agentrt", "word_count", {"text": text})


def _note_count(request: RecordedRequest) -> AnthropicReply:
    words = _result_text(request).strip()
    return AnthropicToolUse.mcp("agentrt", "note", {"text": f"{words} words", "tags": ["hamlet"]})


def _noted(request: RecordedRequest) -> AnthropicReply:
    return AnthropicText(f"{_last_tool_input(request).get('text')}; noted.")


# examples/app_tools.py: the plain tool counts, the method tool keeps the count as a note.
APP_TOOLS = _scenario(
    [
        (
            "How many words",
            [
                _reply(
                    AnthropicToolUse.tool_search("mcp__agentrt__word_count", "mcp__agentrt__note")
                ),
                _count_words,
                _note_count,
                _noted,
            ],
        )
    ]
)


def _read_first_python_file(request: RecordedRequest) -> AnthropicReply:
    found = [line for line in _result_text(request).splitlines() if line.endswith(".py")]
    if not found:
        return AnthropicText("There are no Python files here to review.")
    return AnthropicToolUse("Read", {"file_path": found[0]})


def _reviewed(request: RecordedRequest) -> AnthropicReply:
    name = os.path.basename(str(_last_tool_input(request).get("file_path", "")))
    return AnthropicText(f"Read {name}; a real model would name its worst bug here.")


# examples/reviewer.py: list the Python files, read one, report.
REVIEWER = _scenario(
    [
        (
            "Review",
            [
                _reply(AnthropicToolUse("Glob", {"pattern": "**/*.py"})),
                _read_first_python_file,
                _reviewed,
            ],
        )
    ]
)


def _commit_a_line(request: RecordedRequest) -> AnthropicReply:
    # The agent's worktree is named after its branch (agentrt/<name>): its last part.
    who = os.path.basename(_cwd(request))
    # `git add` first: in a repository that does not track notes.txt (or lacks it), a
    # `commit -a` would commit nothing and the branch keep the repository's last commit.
    command = (
        f"printf '{who} was here\\n' >> notes.txt && git add notes.txt"
        f" && git commit -qm '{who}: a line'"
    )
    return AnthropicToolUse("Bash", {"command": command, "description": "Edit and commit"})


# examples/fleet.py: each agent appends its line to notes.txt and commits it.
FLEET = _scenario(
    [("Add your line", [_commit_a_line, _reply(AnthropicText("Committed on my branch."))])]
)

SCENARIOS: Mapping[str, Scenario] = {
    "fleet": FLEET,
    "guarded": GUARDED,
    "app_tools": APP_TOOLS,
    "reviewer": REVIEWER,
}

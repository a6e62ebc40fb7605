"""Record the pinned Gemini CLI's stream-json output for the translation tests.

    PYTHONPATH=tests .venv/bin/python tests/realcli/capture_gemini.py [NAME ...]

Runs each scenario (or only those named, keeping the others' fixtures) against the fake
Gemini API and writes, under tests/fixtures/gemini/, one ``<name>.jsonl`` (stdout as the
CLI printed it) per turn plus ``manifest.json`` (what each is, its exit, its stderr's last
lines). Paths and the port are replaced by placeholders.
"""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any

import trio
from _gemini import (
    ROOT,
    Place,
    decode,
    gemini_binary,
    gemini_place,
    gemini_version,
    redact_paths,
)
from npm_clis import run_command

from agentrt.backends.gemini import GeminiBackend
from agentrt.testing import (
    FakeGemini,
    GeminiError,
    GeminiReply,
    GeminiScript,
    GeminiText,
    GeminiUsage,
    open_fake_gemini,
)

OUT = ROOT / "tests" / "fixtures" / "gemini"
TURN1 = GeminiUsage(prompt_tokens=100, output_tokens=7, cached_tokens=30)
TURN2 = GeminiUsage(prompt_tokens=150, output_tokens=9, cached_tokens=80)
# (name, what it shows, the script, options, one prompt per turn; a turn after the first
# resumes the session; "lost" resumes one the CLI never saw)
Scenario = tuple[str, str, GeminiScript, dict[str, Any], list[str]]
SCENARIOS: list[Scenario] = [
    (
        "session",
        "two turns of one session: text, then --resume",
        [GeminiReply.text("Hello there", usage=TURN1), GeminiReply.text("Again", usage=TURN2)],
        {},
        ["Say hello", "And again"],
    ),
    (
        "shell_tool",
        "yolo: a run_shell_command call, its result, then text",
        [GeminiReply.shell("echo hello-from-the-tool"), GeminiReply.text("It printed it.")],
        {"approval_mode": "yolo"},
        ["Run the command"],
    ),
    (
        "failing_tool",
        "yolo: a shell command that fails",
        [GeminiReply.shell("exit 3"), GeminiReply.text("It failed.")],
        {"approval_mode": "yolo"},
        ["Run the failing command"],
    ),
    (
        "http_401",
        "the API answers 401 UNAUTHENTICATED",
        [GeminiError(401, "API key not valid. Please pass a valid API key.")],
        {},
        ["Hello"],
    ),
    (
        "http_400_key",
        "the real API's answer to a wrong key: 400 INVALID_ARGUMENT",
        [GeminiError(400, "API key not valid. Please pass a valid API key.")],
        {},
        ["Hello"],
    ),
    (
        "http_429",
        "the API answers 429 RESOURCE_EXHAUSTED",
        [GeminiError(429, "Resource has been exhausted (e.g. check quota).")],
        {},
        ["Hello"],
    ),
    (
        "http_503",
        "the API answers 503 UNAVAILABLE",
        [GeminiError(503, "The model is overloaded. Please try again later.")],
        {},
        ["Hello"],
    ),
    (
        "usage_limit",
        "the API answers 429 with a quota back only in an hour (Please retry in 3600s)",
        [GeminiError.usage_limit(retry_in=3600)],
        {},
        ["Hello"],
    ),
    (
        "context_exceeded",
        "the API answers 400: the input token count exceeds the maximum",
        [GeminiError.context_exceeded()],
        {},
        ["Hello"],
    ),
    (
        "cut_stream",
        "the stream is cut after two chunks",
        [GeminiReply((GeminiText("one two three four"),), cut_after=2)],
        {},
        ["Hello"],
    ),
    ("lost", "--resume of a session the CLI never saw", [], {}, ["Hello?"]),
]


async def run(
    place: Place, api: FakeGemini, options: dict[str, Any], prompt: str, session_id: str | None
) -> dict[str, Any]:
    binary = gemini_binary()
    assert binary is not None, "run `make gemini-cli` first"
    backend = GeminiBackend()
    command = backend.command(place.options(binary, api, **options), prompt, session_id=session_id)
    done = await run_command(command)
    stderr = done.stderr.decode(errors="replace").splitlines()
    tail = [line for line in stderr if not line.lstrip().startswith("at ")][-12:]
    return {
        "stdout": redact_paths(done.stdout.decode(), place, api),
        "returncode": done.returncode,
        "stderr_tail": redact_paths("\n".join(tail), place, api),
    }


async def capture(scenario: Scenario) -> dict[str, dict[str, Any]]:
    name, what, script, options, prompts = scenario
    recorded: dict[str, dict[str, Any]] = {}
    async with open_fake_gemini(script) as api, gemini_place() as place:
        session_id = str(uuid.uuid4()) if name == "lost" else None
        for turn, prompt in enumerate(prompts, 1):
            result = await run(place, api, options, prompt, session_id)
            frames = decode(result["stdout"].encode())
            session_id = next((f["session_id"] for f in frames if f.get("type") == "init"), None)
            key = name if len(prompts) == 1 else f"{name}_turn{turn}"
            (OUT / f"{key}.jsonl").write_text(result.pop("stdout"))
            recorded[key] = {"what": what, **result}
    return recorded


async def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, Any] = {"gemini_version": gemini_version(), "fixtures": {}}
    chosen = sys.argv[1:]
    if chosen:
        manifest = json.loads((OUT / "manifest.json").read_text())
    for scenario in SCENARIOS:
        if chosen and scenario[0] not in chosen:
            continue
        print("capturing", scenario[0], file=sys.stderr)
        manifest["fixtures"].update(await capture(scenario))
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")


if __name__ == "__main__":
    trio.run(main)

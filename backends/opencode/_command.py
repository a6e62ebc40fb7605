"""The argv, environment, stdin and config file of one ``opencode run`` turn.

``opencode run --format json --title <title> [--session <id>] [options]``, the prompt on
stdin (``run`` reads piped stdin as the message). Checked against opencode 1.18.33.
"""

from __future__ import annotations

import json

from agentrt.backend import Command, InvalidOptions, SecretFile, child_env

from ._options import OpencodeOptions, session_id_error

_PREFIX = ("run", "--format", "json")

# Set for every child: an agent's CLI does not upgrade itself between turns, nor share
# its sessions to opencode's servers.
FIXED_ENV = {"OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_SHARE": "1"}
CONFIG_VAR = "OPENCODE_CONFIG"


def build_command(options: OpencodeOptions, prompt: str, *, session_id: str | None) -> Command:
    """The command for one turn; ``--session session_id`` when a session id is given.

    Raises `agentrt.InvalidOptions` for a session id that is not opencode's."""
    o = options
    argv: list[str | SecretFile] = [o.binary, *_PREFIX, "--title", o.title]
    if session_id is not None:
        if why := session_id_error(session_id):
            raise InvalidOptions("session_id", session_id, why)
        argv += ["--session", session_id]
    if o.model is not None:
        argv += ["--model", o.model]
    if o.agent is not None:
        argv += ["--agent", o.agent]
    if o.auto:
        argv.append("--auto")
    argv += o.extra_args
    # No interrupt signal: SIGINT ends `opencode run` at once, as the kill ladder does;
    # the session keeps every part that was stored before it.
    return Command(
        argv=tuple(argv),
        env=opencode_env(o),
        env_files=config_files(o),
        cwd=o.cwd,
        stdin=prompt.encode(),
    )


def build_version_command(options: OpencodeOptions) -> Command:
    """``opencode --version``, which prints ``X.Y.Z``."""
    return Command(argv=(options.binary, "--version"), env=opencode_env(options), cwd=options.cwd)


def opencode_env(o: OpencodeOptions) -> dict[str, str]:
    """The child environment: the env policy's, the fixed variables, then ``env``."""
    return child_env(o.effective_env_policy, {**FIXED_ENV, **o.env})


def config_files(o: OpencodeOptions) -> dict[str, SecretFile]:
    """The ``config`` option as a 0600 file named by OPENCODE_CONFIG; none without it."""
    if not o.config:
        return {}
    content = json.dumps(o.config, separators=(",", ":")).encode()
    return {CONFIG_VAR: SecretFile("opencode.json", content)}

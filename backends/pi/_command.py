"""The argv, environment, stdin and models file of one ``pi --mode json`` turn.

``pi --mode json -p [--session <id>] [options]``, the prompt on stdin (print mode reads
piped stdin as the message). Checked against pi 0.73.1.
"""

from __future__ import annotations

import json
import os

from agentrt.backend import Command, ConfigFile, InvalidOptions, SecretFile, child_env

from ._options import PiOptions, session_id_error

_PREFIX = ("--mode", "json", "-p")
_LIVE_PREFIX = ("--mode", "rpc")

# Set for every child: no network at start-up (pi checks for updates and fetches package
# lists) and no install telemetry. An agent's CLI talks to its model API and nothing else.
FIXED_ENV = {"PI_OFFLINE": "1", "PI_TELEMETRY": "0"}


def build_command(options: PiOptions, prompt: str, *, session_id: str | None) -> Command:
    """The command for one turn; ``--session session_id`` when a session id is given.

    Raises `agentrt.InvalidOptions` for a session id that is not a whole UUID (pi takes a
    prefix of any session's id, so a short one could name another)."""
    return _command(options, session_id, _PREFIX, prompt.encode())


def build_live_command(options: PiOptions, *, session_id: str | None) -> Command:
    """The command of a live process: as `build_command`'s, in ``--mode rpc`` (commands on
    stdin, which stays open)."""
    return _command(options, session_id, _LIVE_PREFIX, b"")


def _command(
    o: PiOptions, session_id: str | None, prefix: tuple[str, ...], stdin: bytes
) -> Command:
    argv: list[str | SecretFile] = [o.binary, *prefix]
    if session_id is not None:
        if why := session_id_error(session_id):
            raise InvalidOptions("session_id", session_id, why)
        argv += ["--session", session_id]
    for flag, value in (
        ("--provider", o.provider),
        ("--model", o.model),
        ("--thinking", o.thinking),
        ("--system-prompt", o.system_prompt),
        ("--append-system-prompt", o.append_system_prompt),
    ):
        if value is not None:
            argv += [flag, value]
    if o.tools:
        argv += ["--tools", ",".join(o.tools)]
    argv += o.extra_args
    # No interrupt signal: pi's print mode has no clean stop on SIGINT; the kill ladder
    # ends the turn, and the session file keeps every message that ended before it (a live
    # process is interrupted in band, see _live).
    return Command(
        argv=tuple(argv),
        env=pi_env(o),
        cwd=o.cwd,
        stdin=stdin,
        config_files=models_files(o),
    )


def build_version_command(options: PiOptions) -> Command:
    """``pi --version``, which prints ``X.Y.Z`` (on stderr)."""
    return Command(argv=(options.binary, "--version"), env=pi_env(options), cwd=options.cwd)


def pi_env(o: PiOptions) -> dict[str, str]:
    """The child environment: the env policy's, PI_CODING_AGENT_DIR, the fixed variables,
    then the explicit ``env``."""
    explicit = {"PI_CODING_AGENT_DIR": o.pi_home} if o.pi_home else {}
    return child_env(o.effective_env_policy, {**explicit, **FIXED_ENV, **o.env})


def models_files(o: PiOptions) -> tuple[ConfigFile, ...]:
    """The models.json of a named CLI home, from the ``models`` option; none without it
    (the home's own file, if any, is left as it is)."""
    if o.pi_home is None or not o.models:
        return ()
    content = json.dumps(o.models, indent=2, sort_keys=True).encode() + b"\n"
    return (ConfigFile(os.path.join(o.pi_home, "models.json"), content),)

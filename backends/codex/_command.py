"""The argv, environment and stdin of one ``codex exec`` turn.

First turn: ``codex exec --json --skip-git-repo-check [options] -``; later turns:
``codex exec --json --skip-git-repo-check resume <thread_id> [options] -``. The prompt is
read from stdin (``-``). Checked against codex 0.171.0.
"""

from __future__ import annotations

import json
import signal
import uuid
from collections.abc import Mapping

from agentrt.backend import Command, InvalidOptions, SecretFile, child_env

from ._options import CodexOptions, toml_value

_PREFIX = ("exec", "--json", "--skip-git-repo-check")


def build_command(
    options: CodexOptions,
    prompt: str,
    *,
    session_id: str | None,
    environ: Mapping[str, str] | None = None,
) -> Command:
    """The command for one turn; ``exec resume <session_id>`` when a session id is given.

    Raises `agentrt.InvalidOptions` for an option ``exec resume`` cannot take, and for a
    session id that is not a UUID (codex would silently start a new thread under that name).
    """
    o = options
    argv: list[str | SecretFile] = [o.binary, *_PREFIX]
    if session_id is not None:
        _check_resumable(o, session_id)
        # exec fork takes what exec resume takes, and starts a new thread on a copy.
        argv += ["fork" if o.fork_session else "resume", session_id]
    if o.model:
        argv += ["--model", o.model]
    if o.sandbox and session_id is None:
        argv += ["--sandbox", o.sandbox]
    elif o.sandbox:
        # exec resume has no --sandbox and does not keep the first turn's: without this a
        # resumed turn would fall back to the configured default (read-only).
        argv += ["-c", f"sandbox_mode={toml_value(o.sandbox)}"]
    if o.approval == "approve-for-me":
        argv.append("--approve-for-me")
    elif o.approval == "bypass":
        argv.append("--dangerously-bypass-approvals-and-sandbox")
    if o.profile:
        argv += ["--profile", o.profile]
    # One --image=PATH each: a bare "-i a.png" greedily takes the "-" after it as an image.
    argv += [f"--image={image}" for image in o.images]
    if isinstance(o.output_schema, str):
        argv += ["--output-schema", o.output_schema]
    elif o.output_schema is not None:
        schema = json.dumps(o.output_schema, separators=(",", ":")).encode()
        argv += ["--output-schema", SecretFile("output-schema.json", schema)]
    argv += config_args(o)
    argv += o.extra_args
    argv.append("-")
    return Command(
        argv=tuple(argv),
        env=codex_env(o, environ),
        cwd=o.cwd,
        stdin=prompt.encode(),
        # codex ends a turn on SIGINT within ~50 ms (exit 1): it kills the turn's commands
        # and records the abort in the rollout, so the resumed thread knows it was cut off.
        interrupt_signal=signal.SIGINT,
    )


def build_version_command(
    options: CodexOptions, *, environ: Mapping[str, str] | None = None
) -> Command:
    """``codex --version``, which prints ``codex-cli X.Y.Z``."""
    env = codex_env(options, environ)
    return Command(argv=(options.binary, "--version"), env=env, cwd=options.cwd)


def _check_resumable(o: CodexOptions, session_id: str) -> None:
    try:
        uuid.UUID(session_id)
    except ValueError:
        raise InvalidOptions(
            "session_id",
            session_id,
            "not a codex thread id (a UUID); exec resume would start a new thread instead",
        ) from None
    if o.profile:
        raise InvalidOptions(
            "profile",
            o.profile,
            "codex exec resume has no --profile, so a resumed session cannot apply it; "
            "set the profile's values with config= instead",
        )
    if o.approval == "approve-for-me":
        raise InvalidOptions(
            "approval",
            o.approval,
            "codex exec resume has no --approve-for-me, so a resumed session cannot apply it",
        )


# codex 0.171.0's config key for its release check at start (and the offer to update).
UPDATE_CHECK_KEY = "check_for_update_on_startup"


def config_args(o: CodexOptions) -> list[str]:
    """``-c key=value`` for each ``config`` override (every codex subcommand takes them),
    after the update check switched off unless ``auto_update``."""
    config: dict[str, object] = {} if o.auto_update else {UPDATE_CHECK_KEY: False}
    config.update(o.config)
    return [arg for key, value in config.items() for arg in ("-c", f"{key}={toml_value(value)}")]


def codex_env(o: CodexOptions, environ: Mapping[str, str] | None) -> dict[str, str]:
    """The child environment: the env policy's, CODEX_HOME, then the explicit ``env``."""
    explicit = {"CODEX_HOME": o.codex_home} if o.codex_home else {}
    return child_env(o.effective_env_policy, {**explicit, **o.env}, environ=environ)

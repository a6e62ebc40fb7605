"""ACP backend options, validated up front into one frozen attrs class."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from typing import Any

import attrs

from agentrt.backend import ENV_POLICIES, REDACTED, EnvPolicy, InvalidOptions

from .. import _validate as v

# The agent's command line when an agent names none (shell words: "gemini --acp").
COMMAND_VAR = "AGENTRT_ACP_COMMAND"


@attrs.frozen(kw_only=True)
class AcpOptions:
    """Everything one ACP agent is configured with. Build it with
    `AcpBackend.parse_options`, which validates every key and value."""

    # The agent's argv: ("gemini", "--acp"), ("qwen", "--acp"), ("opencode", "acp").
    command: tuple[str, ...]
    # The session's working directory (ACP wants it absolute: made so, symlinks resolved).
    cwd: str | None = None
    # The ``authenticate`` method to call before the session (one of the agent's
    # ``authMethods``); None: none, for an agent that is logged in by its own settings.
    auth_method: str | None = None
    env: Mapping[str, str] = attrs.field(
        factory=dict, hash=False, repr=lambda value: repr(_shown("env", value))
    )
    env_policy: EnvPolicy = "inherit"

    @property
    def session_cwd(self) -> str:
        """The ``cwd`` of ``session/new`` and ``session/load`` (`session_cwd`)."""
        return session_cwd(self.cwd)


def session_cwd(cwd: str | None) -> str:
    """``cwd`` (None: the runtime's) as ``session/new`` and ``session/load`` send it:
    absolute and resolved, so that one directory is one project to the agent however it is
    named."""
    return os.path.realpath(cwd or os.getcwd())


def _command(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        raise v.Bad("expected the agent's argv as a list of strings, e.g. ['gemini', '--acp']")
    words = v.strings(value)
    if not words:
        raise v.Bad("expected the agent's argv, e.g. ['gemini', '--acp']")
    return words


def _shown(key: str, value: Any) -> Any:
    """``value`` as an error or repr may show it: env values may be secrets."""
    if key == "env" and isinstance(value, Mapping):
        return {name: REDACTED for name in value}
    return value


_CHECKS: dict[str, v.Check] = {
    "command": _command,
    "cwd": v.path,
    "auth_method": v.text,
    "env": v.env_mapping,
    "env_policy": v.choice(ENV_POLICIES),
}
KNOWN_KEYS: tuple[str, ...] = tuple(_CHECKS)
_structure = v.make_parser(AcpOptions, _CHECKS, shown=_shown)


def parse_options(raw: Mapping[str, Any], environ: Mapping[str, str]) -> AcpOptions:
    """Validate ``raw`` into `AcpOptions`; without ``command``, ``$AGENTRT_ACP_COMMAND``
    (shell words) from ``environ``. A ``None`` value means "unset".

    Raises `agentrt.InvalidOptions` naming the first unknown key (with the closest known
    one), or the key, value and what is allowed for the first bad value; naming
    ``command`` when neither gives one."""
    if isinstance(raw, Mapping) and raw.get("command") is None and environ.get(COMMAND_VAR):
        try:
            words = shlex.split(environ[COMMAND_VAR])
        except ValueError as exc:
            raise InvalidOptions(
                COMMAND_VAR, environ[COMMAND_VAR], f"not shell words: {exc}"
            ) from None
        raw = {**raw, "command": words}
    if isinstance(raw, Mapping) and raw.get("command") is None:
        raise InvalidOptions(
            "command",
            None,
            "name the ACP agent to run, e.g. command=['gemini', '--acp'] "
            f"(or set {COMMAND_VAR} to its command line)",
        )
    return _structure(raw)

"""pi backend options, validated up front into one frozen attrs class.

Checked against ``pi --help`` and the models file of pi 0.73.1
(``@mariozechner/pi-coding-agent``).
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from typing import Any, Literal, get_args

import attrs

from agentrt.backend import ENV_POLICIES, REDACTED, EnvPolicy, InvalidOptions, default_env_policy

from .. import _validate as v

# --thinking's choices.
Thinking = Literal["off", "minimal", "low", "medium", "high", "xhigh"]
JsonObject = Mapping[str, Any]

# Flags the backend owns: the translator reads --mode json, the prompt comes on stdin,
# the backend picks the session (and where sessions are kept: in the agent's home).
_RESERVED_FLAGS = (
    "--mode",
    "-p",
    "--print",
    "-c",
    "--continue",
    "-r",
    "--resume",
    "--session",
    "--fork",
    "--session-dir",
    "--no-session",
    "--provider",
    "--model",
    "--thinking",
    "-t",
    "--tools",
    "--api-key",
    "--system-prompt",
    "--append-system-prompt",
    "--export",
)


def _default_binary() -> str:
    return os.environ.get("PI_CLI") or "pi"


@attrs.frozen(kw_only=True)
class PiOptions:
    """Everything one pi agent is configured with. Build it with `PiBackend.parse_options`,
    which validates every key and value."""

    binary: str = attrs.field(factory=_default_binary)
    cwd: str | None = None
    # The CLI's agent folder (PI_CODING_AGENT_DIR: settings, models.json, sessions). Named,
    # it is the backend's: its models.json is written each turn from ``models``, and the
    # default env policy is "profile".
    pi_home: str | None = None
    provider: str | None = None
    model: str | None = None
    thinking: Thinking | None = None
    # The --tools allowlist (empty: pi's default tools, read, bash, edit and write).
    tools: tuple[str, ...] = ()
    system_prompt: str | None = None
    append_system_prompt: str | None = None
    # The models file (custom providers: base URL, API, key or the variable holding it),
    # written into pi_home as models.json.
    models: JsonObject = attrs.field(
        factory=dict, hash=False, repr=lambda value: repr(_shown("models", value))
    )
    env: Mapping[str, str] = attrs.field(
        factory=dict, hash=False, repr=lambda value: repr(_shown("env", value))
    )
    env_policy: EnvPolicy | None = None
    extra_args: tuple[str, ...] = ()

    @property
    def effective_env_policy(self) -> EnvPolicy:
        """The explicit env policy, else ``profile`` iff a CLI home is named."""
        if self.env_policy is not None:
            return self.env_policy
        home = self.pi_home or self.env.get("PI_CODING_AGENT_DIR")
        return default_env_policy(config_dir=home)


def _flag_value(value: Any) -> str:
    # A leading dash would be read as another flag.
    if v.text(value).startswith("-"):
        raise v.Bad("cannot start with '-'")
    return value  # type: ignore[no-any-return]


def _tools(value: Any) -> tuple[str, ...]:
    tools = v.strings(value)
    for tool in tools:
        # pi splits --tools on commas.
        if "," in tool or tool.startswith("-"):
            raise v.Bad(f"a tool name cannot contain a comma or start with '-': {tool!r}")
    return tools


def _models(value: Any) -> JsonObject:
    if not isinstance(value, Mapping):
        raise v.Bad("expected a mapping in the form of pi's models.json ({'providers': {...}})")
    try:
        return json.loads(json.dumps(value))  # type: ignore[no-any-return]
    except (TypeError, ValueError) as exc:
        raise v.Bad(f"models must be JSON-serialisable ({exc})") from None


def _shown(key: str, value: Any) -> Any:
    """``value`` as an error or repr may show it: env values and the models file (its API
    keys) may be secrets."""
    if key == "env" and isinstance(value, Mapping):
        return {name: REDACTED for name in value}
    if key == "models" and isinstance(value, Mapping):
        return REDACTED
    return value


def session_id_error(value: str) -> str | None:
    """Why ``value`` cannot be given to ``--session``, or None. pi matches a session by id
    prefix, so only a whole UUID names one session."""
    try:
        uuid.UUID(value)
    except ValueError:
        return "not a pi session id (a UUID)"
    return None


_CHECKS: dict[str, v.Check] = {
    "binary": v.path,
    "cwd": v.path,
    "pi_home": v.path,
    "provider": _flag_value,
    "model": _flag_value,
    "thinking": v.choice(get_args(Thinking)),
    "tools": _tools,
    "system_prompt": v.string,
    "append_system_prompt": v.string,
    "models": _models,
    "env": v.env_mapping,
    "env_policy": v.choice(ENV_POLICIES),
    "extra_args": v.args_without(_RESERVED_FLAGS),
}
KNOWN_KEYS: tuple[str, ...] = tuple(_CHECKS)
_structure = v.make_parser(PiOptions, _CHECKS, shown=_shown)


def parse_options(raw: Mapping[str, Any]) -> PiOptions:
    """Validate ``raw`` into `PiOptions`. A ``None`` value means "unset".

    Raises `agentrt.InvalidOptions` naming the first unknown key (with the closest known
    one), or the key, value and what is allowed for the first bad value."""
    options = _structure(raw)
    v.same_as_env("pi_home", options.pi_home, options.env, "PI_CODING_AGENT_DIR")
    if options.pi_home is not None and not os.path.isabs(options.pi_home):
        raise InvalidOptions("pi_home", options.pi_home, "expected an absolute path")
    if options.pi_home is None and options.models:
        raise InvalidOptions(
            "models",
            REDACTED,
            "the backend writes models.json only into a CLI home of its own: name pi_home",
        )
    return options

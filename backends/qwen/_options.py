"""Qwen Code backend options, validated up front into one frozen attrs class."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Mapping
from typing import Any, Literal, get_args

import attrs

from agentrt.backend import ENV_POLICIES, REDACTED, EnvPolicy, InvalidOptions, default_env_policy

from .. import _validate as v

# The choices of qwen 0.24.4's --auth-type and --approval-mode.
AuthType = Literal["anthropic", "openai", "openai-responses", "qwen-oauth", "gemini", "vertex-ai"]
ApprovalMode = Literal["plan", "default", "auto-edit", "auto", "yolo"]
JsonObject = Mapping[str, Any]

# Flags the backend owns: the translator depends on the formats, resume on the transcript
# and on the backend choosing the session, the approvals on the mode it passes.
_RESERVED_FLAGS = (
    "-p",
    "--prompt",
    "-i",
    "--prompt-interactive",
    "-o",
    "--output-format",
    "--input-format",
    "--chat-recording",
    "-r",
    "--resume",
    "-c",
    "--continue",
    "--session-id",
    "--fork-session",
    "-y",
    "--yolo",
    "--approval-mode",
    "--acp",
)


def _default_binary() -> str:
    return os.environ.get("QWEN_CLI") or "qwen"


@attrs.frozen(kw_only=True)
class QwenOptions:
    """Everything one Qwen Code agent is configured with. Build it with
    `QwenBackend.parse_options`, which validates every key and value."""

    binary: str = attrs.field(factory=_default_binary)
    cwd: str | None = None
    # Sets QWEN_HOME for the child (its settings, sessions, memory) and makes "profile" the
    # default env policy.
    qwen_home: str | None = None
    auth_type: AuthType | None = None
    model: str | None = None
    system_prompt: str | None = None
    append_system_prompt: str | None = None
    # "default" unless given: edits and shell commands need an approval (headless: those
    # tools are left out; live with approve_tool: the agent is asked).
    approval_mode: ApprovalMode = "default"
    allowed_tools: tuple[str, ...] = ()
    exclude_tools: tuple[str, ...] = ()
    max_session_turns: int | None = None
    mcp_config: JsonObject | str | None = attrs.field(
        default=None, hash=False, repr=lambda value: repr(_shown("mcp_config", value))
    )
    # Merged over the backend's own defaults (see _settings.py), section by section.
    settings: JsonObject = attrs.field(
        factory=dict, hash=False, repr=lambda value: repr(_shown("settings", value))
    )
    env: Mapping[str, str] = attrs.field(
        factory=dict, hash=False, repr=lambda value: repr(_shown("env", value))
    )
    env_policy: EnvPolicy | None = None
    include_partial_messages: bool = True
    resume: str | None = None
    session_id: str | None = None
    extra_args: tuple[str, ...] = ()

    @property
    def effective_env_policy(self) -> EnvPolicy:
        """The env policy in force: the explicit one, else profile iff a home is set."""
        if self.env_policy is not None:
            return self.env_policy
        return default_env_policy(config_dir=self.qwen_home or self.env.get("QWEN_HOME"))


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise v.Bad("expected an integer >= 1")
    return value


def _json_object(value: Any, what: str) -> JsonObject:
    if isinstance(value, str) and value.lstrip().startswith("{"):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise v.Bad(f"{what} looks like inline JSON but does not parse ({exc})") from None
    if not isinstance(value, Mapping):
        raise v.Bad(f"{what} must be a JSON object (a dict or JSON object text)")
    try:
        return json.loads(json.dumps(value))  # type: ignore[no-any-return]
    except (TypeError, ValueError) as exc:
        raise v.Bad(f"{what} must be JSON-serialisable ({exc})") from None


def _mcp_config(value: Any) -> JsonObject | str:
    if isinstance(value, Mapping) or (isinstance(value, str) and value.lstrip().startswith("{")):
        return _json_object(value, "an inline MCP config")
    try:
        return v.path(value)
    except v.Bad:
        raise v.Bad("expected a path or an inline MCP config (a dict or JSON text)") from None


def _settings(value: Any) -> JsonObject:
    settings = _json_object(value, "settings")
    for section, body in settings.items():
        if not isinstance(body, Mapping):
            raise v.Bad(f"settings[{section!r}] must be an object (settings go by section)")
    return settings


def session_id_error(value: Any) -> str | None:
    """Why ``value`` cannot be passed to ``--resume``, or None if it can."""
    if not isinstance(value, str) or not value:
        return "expected a non-empty session id string"
    if value.startswith("-") or any(c.isspace() or not c.isprintable() for c in value):
        # A leading dash would be read as a flag; the CLI's ids are UUIDs.
        return "a session id cannot start with '-' or contain whitespace or control characters"
    return None


def _resume(value: Any) -> str:
    why = session_id_error(value)
    if why:
        raise v.Bad(why)
    return value  # type: ignore[no-any-return]


def _uuid(value: Any) -> str:
    try:
        return str(uuid.UUID(v.string(value)))
    except ValueError:
        raise v.Bad("expected a UUID (the CLI's --session-id takes only a UUID)") from None


_HOOKS: dict[str, v.Check] = {
    "binary": v.path,
    "cwd": v.path,
    "qwen_home": v.path,
    "auth_type": v.choice(get_args(AuthType)),
    "model": v.text,
    "system_prompt": v.string,
    "append_system_prompt": v.string,
    "approval_mode": v.choice(get_args(ApprovalMode)),
    "allowed_tools": v.strings,
    "exclude_tools": v.strings,
    "max_session_turns": _positive_int,
    "mcp_config": _mcp_config,
    "settings": _settings,
    "env": v.env_mapping,
    "env_policy": v.choice(ENV_POLICIES),
    "include_partial_messages": v.boolean,
    "resume": _resume,
    "session_id": _uuid,
    "extra_args": v.args_without(_RESERVED_FLAGS),
}


def _shown(key: str, value: Any) -> Any:
    """``value`` as an error or repr may show it: env values and inline JSON may be secrets."""
    if key == "env" and isinstance(value, Mapping):
        return {name: REDACTED for name in value}
    if key in ("mcp_config", "settings") and (
        isinstance(value, Mapping) or (isinstance(value, str) and value.lstrip().startswith("{"))
    ):
        return REDACTED
    return value


KNOWN_KEYS: tuple[str, ...] = tuple(_HOOKS)
_structure = v.make_parser(QwenOptions, _HOOKS, shown=_shown)


def parse_options(raw: Mapping[str, Any]) -> QwenOptions:
    """Validate ``raw`` into `QwenOptions`. A ``None`` value means "unset".

    Raises `agentrt.InvalidOptions` naming the first unknown key (with the closest known
    one), or the key, value and what is allowed for the first bad value."""
    options = _structure(raw)
    if options.resume is not None and options.session_id is not None:
        raise InvalidOptions(
            "session_id", options.session_id, "cannot be combined with 'resume'; give one"
        )
    v.same_as_env("qwen_home", options.qwen_home, options.env, "QWEN_HOME")
    return options

"""Claude Code backend options, validated up front into one frozen attrs class."""

from __future__ import annotations

import json
import math
import os
import uuid
from collections.abc import Mapping
from typing import Any, Literal, get_args

import attrs

from agentrt.backend import ENV_POLICIES, REDACTED, EnvPolicy, InvalidOptions, default_env_policy

from .. import _validate as v

Effort = Literal["low", "medium", "high", "xhigh", "max"]
# The choices of claude 2.1.332's --permission-mode, plus "default", which it still accepts
# (tests/realcli/test_claude_flags.py hands each one to the pinned binary).
PermissionMode = Literal[
    "default", "manual", "acceptEdits", "bypassPermissions", "plan", "dontAsk", "auto"
]
SettingSource = Literal["user", "project", "local"]
Hermetic = Literal["full", "project"]
# An MCP config or settings value: a path (passed through) or an inline JSON object
# (written to a 0600 file by the driver, since inline JSON may carry credentials).
JsonObject = Mapping[str, Any]

# Flags the backend owns: the translator depends on the output format, and resume depends
# on the CLI keeping its transcript and on the backend choosing which session to open.
_RESERVED_FLAGS = (
    "-p",
    "--print",
    "--output-format",
    "--input-format",
    "--no-session-persistence",
    "-r",
    "--resume",
    "-c",
    "--continue",
    "--session-id",
)


def _default_binary() -> str:
    return os.environ.get("CLAUDE_CLI") or "claude"


@attrs.frozen(kw_only=True)
class ClaudeOptions:
    """Everything one Claude Code agent is configured with. Build it with
    `ClaudeBackend.parse_options`, which validates every key and value."""

    binary: str = attrs.field(factory=_default_binary)
    cwd: str | None = None
    # Sets CLAUDE_CONFIG_DIR for the child and makes "profile" the default env policy.
    config_dir: str | None = None
    model: str | None = None
    fallback_model: str | None = None
    system_prompt: str | None = None
    system_prompt_file: str | None = None
    append_system_prompt: str | None = None
    effort: Effort | None = None
    max_turns: int | None = None
    max_budget_usd: float | None = None
    json_schema: str | None = None
    agent: str | None = None
    # None: the CLI's default tool set; (): no built-in tools at all.
    tools: tuple[str, ...] | None = None
    allowed_tools: tuple[str, ...] = ()
    disallowed_tools: tuple[str, ...] = ()
    permission_mode: PermissionMode | None = None
    dangerously_skip_permissions: bool = False
    add_dir: tuple[str, ...] = ()
    mcp_config: tuple[str | JsonObject, ...] = attrs.field(
        default=(), hash=False, repr=lambda value: repr(_shown("mcp_config", value))
    )
    strict_mcp_config: bool = False
    settings: str | JsonObject | None = attrs.field(
        default=None, hash=False, repr=lambda value: repr(_shown("settings", value))
    )
    # None: the CLI's own lookup (user, project, local); (): none of them.
    setting_sources: tuple[SettingSource, ...] | None = None
    hermetic: Hermetic | None = None
    env: Mapping[str, str] = attrs.field(
        factory=dict, hash=False, repr=lambda value: repr(_shown("env", value))
    )
    env_policy: EnvPolicy | None = None
    include_partial_messages: bool = True
    resume: str | None = None
    session_id: str | None = None
    continue_: bool = False
    no_session_persistence: bool = False
    fork_session: bool = False
    # False: the CLI starts with DISABLE_AUTOUPDATER=1, so a fleet keeps the version it was
    # started with; True leaves the CLI's own setting (its native installer updates itself).
    auto_update: bool = False
    extra_args: tuple[str, ...] = ()

    @property
    def effective_env_policy(self) -> EnvPolicy:
        """The env policy in force: the explicit one, else profile iff a config dir is set."""
        if self.env_policy is not None:
            return self.env_policy
        return default_env_policy(config_dir=self.config_dir or self.env.get("CLAUDE_CONFIG_DIR"))


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise v.Bad("expected an integer >= 1")
    return value


def _positive_number(value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise v.Bad("expected a finite number > 0")
    return float(value)


def _json_object(value: Any, what: str) -> JsonObject:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise v.Bad(f"{what} must be JSON-serialisable ({exc})") from None
    if not isinstance(value, Mapping):
        raise v.Bad(f"{what} must be a JSON object")
    return json.loads(text)  # type: ignore[no-any-return]


def _path_or_object(value: Any, what: str) -> str | JsonObject:
    if isinstance(value, Mapping):
        return _json_object(value, what)
    if isinstance(value, str) and _is_inline(value):
        # Inline JSON given as text: still a value, not a path, so it must not reach argv.
        try:
            return _json_object(json.loads(value), what)
        except json.JSONDecodeError as exc:
            raise v.Bad(f"{what} looks like inline JSON but does not parse ({exc})") from None
    try:
        return v.path(value)
    except v.Bad:
        raise v.Bad(f"expected a path or {what} (a dict or a JSON object string)") from None


def _mcp_configs(value: Any) -> tuple[str | JsonObject, ...]:
    items = value if isinstance(value, list | tuple) else [value]
    return tuple(_path_or_object(item, "an inline MCP config") for item in items)


def _settings(value: Any) -> str | JsonObject:
    return _path_or_object(value, "inline settings")


def _json_schema(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise v.Bad(f"expected a JSON schema object (a dict or JSON text): {exc}") from None
    return json.dumps(_json_object(value, "a JSON schema"), separators=(",", ":"))


_SETTING_SOURCES: tuple[str, ...] = get_args(SettingSource)


def _setting_sources(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [s.strip() for s in value.split(",") if s.strip()]
    if not isinstance(value, list | tuple):
        raise v.Bad("expected a list of 'user', 'project', 'local' (or a comma-separated string)")
    check = v.choice(_SETTING_SOURCES)
    return tuple(check(item) for item in value)


def _hermetic(value: Any) -> str | None:
    if value is True:
        return "full"
    if value is False:
        return None
    return v.choice(("full", "project"))(value)  # type: ignore[no-any-return]


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


def _no_session_persistence(value: Any) -> bool:
    if v.boolean(value):
        raise v.Bad(
            "refused: later turns resume the CLI session, which needs the CLI's saved transcript"
        )
    return False


_HOOKS: dict[str, v.Check] = {
    "binary": v.path,
    "cwd": v.path,
    "config_dir": v.path,
    "model": v.text,
    "fallback_model": v.text,
    "system_prompt": v.string,
    "system_prompt_file": v.path,
    "append_system_prompt": v.string,
    "effort": v.choice(get_args(Effort)),
    "max_turns": _positive_int,
    "max_budget_usd": _positive_number,
    "json_schema": _json_schema,
    "agent": v.text,
    "tools": v.strings,
    "allowed_tools": v.strings,
    "disallowed_tools": v.strings,
    "permission_mode": v.choice(get_args(PermissionMode)),
    "dangerously_skip_permissions": v.boolean,
    "add_dir": v.paths,
    "mcp_config": _mcp_configs,
    "strict_mcp_config": v.boolean,
    "settings": _settings,
    "setting_sources": _setting_sources,
    "hermetic": _hermetic,
    "env": v.env_mapping,
    "env_policy": v.choice(ENV_POLICIES),
    "include_partial_messages": v.boolean,
    "resume": _resume,
    "session_id": _uuid,
    "continue_": v.boolean,
    "no_session_persistence": _no_session_persistence,
    "fork_session": v.boolean,
    "auto_update": v.boolean,
    "extra_args": v.args_without(_RESERVED_FLAGS),
}


def parse_options(raw: Mapping[str, Any]) -> ClaudeOptions:
    """Validate ``raw`` into `ClaudeOptions`. A ``None`` value means "unset".

    Raises `agentrt.InvalidOptions` naming the first unknown key (with the closest known
    one), or the key, value and what is allowed for the first bad value."""
    options = _structure(raw)
    _check_combinations(options)
    return options


def _shown(key: str, value: Any) -> Any:
    """``value`` as an error or repr may show it: env values and inline JSON may be secrets."""
    if key == "env" and isinstance(value, Mapping):
        return {name: REDACTED for name in value}
    if key in ("mcp_config", "settings"):
        items = value if isinstance(value, list | tuple) else [value]
        shown = [REDACTED if isinstance(i, Mapping | str) and _is_inline(i) else i for i in items]
        return shown if isinstance(value, list | tuple) else shown[0]
    return value


def _is_inline(value: Mapping[str, Any] | str) -> bool:
    return isinstance(value, Mapping) or value.lstrip().startswith("{")


# Option names as callers spell them; "continue" is a Python keyword.
KNOWN_KEYS: tuple[str, ...] = tuple("continue" if name == "continue_" else name for name in _HOOKS)
_structure = v.make_parser(ClaudeOptions, _HOOKS, shown=_shown, keys={"continue_": "continue"})


def _check_combinations(o: ClaudeOptions) -> None:
    if o.system_prompt is not None and o.system_prompt_file is not None:
        raise InvalidOptions(
            "system_prompt_file", o.system_prompt_file, "give system_prompt or it, not both"
        )
    first_turn = [
        (key, value)
        for key, value in (("resume", o.resume), ("session_id", o.session_id))
        if value is not None
    ] + ([("continue", True)] if o.continue_ else [])
    if len(first_turn) > 1:
        (key, value), (other, _) = first_turn[1], first_turn[0]
        raise InvalidOptions(key, value, f"cannot be combined with {other!r}; give one of them")
    v.same_as_env("config_dir", o.config_dir, o.env, "CLAUDE_CONFIG_DIR")

"""Claude Code backend options, validated up front into one frozen attrs class."""

from __future__ import annotations

import difflib
import json
import math
import os
import uuid
from collections.abc import Callable, Mapping
from typing import Any, Literal, get_args

import attrs
import cattrs
from cattrs.gen import make_dict_structure_fn, override

from agentrt import InvalidOptions
from agentrt._env import ENV_POLICIES, EnvPolicy, default_env_policy
from agentrt._redact import REDACTED

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
        default=(), hash=False, repr=lambda v: repr(_shown("mcp_config", v))
    )
    strict_mcp_config: bool = False
    settings: str | JsonObject | None = attrs.field(
        default=None, hash=False, repr=lambda v: repr(_shown("settings", v))
    )
    # None: the CLI's own lookup (user, project, local); (): none of them.
    setting_sources: tuple[SettingSource, ...] | None = None
    hermetic: Hermetic | None = None
    env: Mapping[str, str] = attrs.field(
        factory=dict, hash=False, repr=lambda v: repr(_shown("env", v))
    )
    env_policy: EnvPolicy | None = None
    include_partial_messages: bool = True
    resume: str | None = None
    session_id: str | None = None
    continue_: bool = False
    no_session_persistence: bool = False
    extra_args: tuple[str, ...] = ()

    @property
    def effective_env_policy(self) -> EnvPolicy:
        """The env policy in force: the explicit one, else profile iff a config dir is set."""
        if self.env_policy is not None:
            return self.env_policy
        return default_env_policy(config_dir=self.config_dir or self.env.get("CLAUDE_CONFIG_DIR"))


class _Bad(ValueError):
    """A value hook's verdict: ``why`` the value is refused (the caller adds key and value)."""


def _string(value: Any) -> str:
    if not isinstance(value, str):
        raise _Bad(f"expected a string, got {type(value).__name__}")
    return value


def _text(value: Any) -> str:
    if not _string(value):
        raise _Bad("expected a non-empty string")
    return value  # type: ignore[no-any-return]


def _path(value: Any) -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value:
        raise _Bad("expected a path (a non-empty str or os.PathLike)")
    if "\0" in value:
        raise _Bad("a path cannot contain a NUL byte")
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise _Bad(f"expected True or False, got {type(value).__name__}")
    return value


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _Bad("expected an integer >= 1")
    return value


def _positive_number(value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise _Bad("expected a finite number > 0")
    return float(value)


def _suggest(value: str, known: tuple[str, ...]) -> str:
    close = difflib.get_close_matches(value, known, n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def _choice(allowed: tuple[str, ...]) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if not isinstance(value, str) or value not in allowed:
            hint = _suggest(value, allowed) if isinstance(value, str) else ""
            raise _Bad(f"expected one of {', '.join(map(repr, allowed))}{hint}")
        return value

    return check


def _strings(value: Any) -> tuple[str, ...]:
    # A bare string is refused: iterating it would silently pass one character per item.
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) and v for v in value):
        raise _Bad("expected a list of non-empty strings")
    return tuple(value)


def _paths(value: Any) -> tuple[str, ...]:
    items = value if isinstance(value, list | tuple) else [value]
    try:
        return tuple(_path(v) for v in items)
    except _Bad:
        raise _Bad("expected a path or a list of paths (str or os.PathLike)") from None


def _json_object(value: Any, what: str) -> JsonObject:
    try:
        text = json.dumps(value)
    except (TypeError, ValueError) as exc:
        raise _Bad(f"{what} must be JSON-serialisable ({exc})") from None
    if not isinstance(value, Mapping):
        raise _Bad(f"{what} must be a JSON object")
    return json.loads(text)  # type: ignore[no-any-return]


def _path_or_object(value: Any, what: str) -> str | JsonObject:
    if isinstance(value, Mapping):
        return _json_object(value, what)
    if isinstance(value, str) and _is_inline(value):
        # Inline JSON given as text: still a value, not a path, so it must not reach argv.
        try:
            return _json_object(json.loads(value), what)
        except json.JSONDecodeError as exc:
            raise _Bad(f"{what} looks like inline JSON but does not parse ({exc})") from None
    try:
        return _path(value)
    except _Bad:
        raise _Bad(f"expected a path or {what} (a dict or a JSON object string)") from None


def _mcp_configs(value: Any) -> tuple[str | JsonObject, ...]:
    items = value if isinstance(value, list | tuple) else [value]
    return tuple(_path_or_object(v, "an inline MCP config") for v in items)


def _settings(value: Any) -> str | JsonObject:
    return _path_or_object(value, "inline settings")


def _json_schema(value: Any) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise _Bad(f"expected a JSON schema object (a dict or JSON text): {exc}") from None
    return json.dumps(_json_object(value, "a JSON schema"), separators=(",", ":"))


_SETTING_SOURCES: tuple[str, ...] = get_args(SettingSource)


def _setting_sources(value: Any) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [s.strip() for s in value.split(",") if s.strip()]
    if not isinstance(value, list | tuple):
        raise _Bad("expected a list of 'user', 'project', 'local' (or a comma-separated string)")
    check = _choice(_SETTING_SOURCES)
    return tuple(check(v) for v in value)


def _hermetic(value: Any) -> str | None:
    if value is True:
        return "full"
    if value is False:
        return None
    return _choice(("full", "project"))(value)  # type: ignore[no-any-return]


def _env(value: Any) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise _Bad("expected a mapping of variable names to string values")
    for name, val in value.items():
        if not isinstance(name, str) or not name or "=" in name or "\0" in name:
            raise _Bad(f"variable name {name!r} is not a valid environment variable name")
        if not isinstance(val, str) or "\0" in val:
            # The value is named by its variable only: it may well be a credential.
            raise _Bad(f"the value of {name} must be a str with no NUL byte")
    return dict(value)


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
        raise _Bad(why)
    return value  # type: ignore[no-any-return]


def _uuid(value: Any) -> str:
    try:
        return str(uuid.UUID(_string(value)))
    except ValueError:
        raise _Bad("expected a UUID (the CLI's --session-id takes only a UUID)") from None


def _no_session_persistence(value: Any) -> bool:
    if _bool(value):
        raise _Bad(
            "refused: later turns resume the CLI session, which needs the CLI's saved transcript"
        )
    return False


def _extra_args(value: Any) -> tuple[str, ...]:
    args = _strings(value)
    for arg in args:
        flag = arg.split("=", 1)[0]
        if flag in _RESERVED_FLAGS:
            raise _Bad(f"{flag} is set by the backend and cannot be passed in extra_args")
    return args


_HOOKS: dict[str, Callable[[Any], Any]] = {
    "binary": _path,
    "cwd": _path,
    "config_dir": _path,
    "model": _text,
    "fallback_model": _text,
    "system_prompt": _string,
    "system_prompt_file": _path,
    "append_system_prompt": _string,
    "effort": _choice(get_args(Effort)),
    "max_turns": _positive_int,
    "max_budget_usd": _positive_number,
    "json_schema": _json_schema,
    "agent": _text,
    "tools": _strings,
    "allowed_tools": _strings,
    "disallowed_tools": _strings,
    "permission_mode": _choice(get_args(PermissionMode)),
    "dangerously_skip_permissions": _bool,
    "add_dir": _paths,
    "mcp_config": _mcp_configs,
    "strict_mcp_config": _bool,
    "settings": _settings,
    "setting_sources": _setting_sources,
    "hermetic": _hermetic,
    "env": _env,
    "env_policy": _choice(ENV_POLICIES),
    "include_partial_messages": _bool,
    "resume": _resume,
    "session_id": _uuid,
    "continue_": _bool,
    "no_session_persistence": _no_session_persistence,
    "extra_args": _extra_args,
}
# Option names as callers spell them; "continue" is a Python keyword.
_KEY = {name: ("continue" if name == "continue_" else name) for name in _HOOKS}
KNOWN_KEYS: tuple[str, ...] = tuple(_KEY.values())


def _struct_hook(check: Callable[[Any], Any]) -> Callable[[Any, Any], Any]:
    return lambda value, _type: check(value)


_OVERRIDES = {
    name: override(rename=_KEY[name], struct_hook=_struct_hook(hook))
    for name, hook in _HOOKS.items()
}
_converter = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True)
_converter.register_structure_hook(
    ClaudeOptions,
    # mypy cannot tell these per-attribute overrides from the function's own keywords.
    make_dict_structure_fn(
        ClaudeOptions,
        _converter,
        _cattrs_forbid_extra_keys=True,
        **_OVERRIDES,  # type: ignore[arg-type]
    ),
)
assert set(_HOOKS) == {a.name for a in attrs.fields(ClaudeOptions)}


def parse_options(raw: Mapping[str, Any]) -> ClaudeOptions:
    """Validate ``raw`` into `ClaudeOptions`. A ``None`` value means "unset".

    Raises `agentrt.InvalidOptions` naming the first unknown key (with the closest known
    one), or the key, value and what is allowed for the first bad value."""
    if not isinstance(raw, Mapping):
        raise InvalidOptions("options", raw, "expected a mapping of option names to values")
    given = {k: v for k, v in raw.items() if v is not None}
    try:
        options = _converter.structure(given, ClaudeOptions)
    except cattrs.ClassValidationError as exc:
        raise _invalid(exc, given) from exc
    _check_combinations(options)
    return options


def _invalid(exc: cattrs.ClassValidationError, given: Mapping[str, Any]) -> InvalidOptions:
    for sub in exc.exceptions:
        if isinstance(sub, cattrs.ForbiddenExtraKeysError):
            key = sorted(map(str, sub.extra_fields))[0]
            hint = _suggest(key, KNOWN_KEYS) or f"; known options: {', '.join(KNOWN_KEYS)}"
            return InvalidOptions(key, _shown(key, given.get(key)), f"unknown option{hint}")
    for sub in exc.exceptions:
        for note in getattr(sub, "__notes__", ()):
            name = getattr(note, "name", None)
            if name in _KEY:
                key = _KEY[name]
                return InvalidOptions(key, _shown(key, given.get(key)), str(sub))
    raise AssertionError("cattrs reported an error for no option") from exc


def _shown(key: str, value: Any) -> Any:
    """``value`` as an error or repr may show it: env values and inline JSON may be secrets."""
    if key == "env" and isinstance(value, Mapping):
        return {name: REDACTED for name in value}
    if key in ("mcp_config", "settings"):
        items = value if isinstance(value, list | tuple) else [value]
        shown = [REDACTED if isinstance(v, Mapping | str) and _is_inline(v) else v for v in items]
        return shown if isinstance(value, list | tuple) else shown[0]
    return value


def _is_inline(value: Mapping[str, Any] | str) -> bool:
    return isinstance(value, Mapping) or value.lstrip().startswith("{")


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
    env_dir = o.env.get("CLAUDE_CONFIG_DIR")
    if o.config_dir is not None and env_dir is not None and env_dir != o.config_dir:
        raise InvalidOptions(
            "config_dir", o.config_dir, f"differs from env['CLAUDE_CONFIG_DIR']={env_dir!r}"
        )

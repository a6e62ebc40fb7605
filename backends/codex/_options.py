"""Codex backend options, validated up front into one frozen attrs class.

Checked against ``codex exec --help`` and ``codex exec resume --help`` of codex 0.171.0.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
from collections.abc import Mapping
from typing import Any, Literal, get_args

import attrs

from agentrt.backend import (
    ENV_POLICIES,
    REDACTED,
    EnvPolicy,
    InvalidOptions,
    default_env_policy,
    is_secret_name,
)

from .. import _validate as v

Sandbox = Literal["read-only", "workspace-write", "danger-full-access"]
# `codex exec` never asks (its approval policy is always "never"); these are the two flags
# that change what it does instead. "never" is accepted as the explicit form of the default.
Approval = Literal["never", "approve-for-me", "bypass"]
ConfigValue = str | int | float | bool | list[Any] | Mapping[str, Any]
JsonObject = Mapping[str, Any]

# Flags the backend owns: the translator reads --json, resume needs a saved rollout, and the
# backend decides which thread to resume and that the prompt comes from stdin.
_RESERVED_FLAGS = ("--json", "resume", "fork", "review", "--last", "--ephemeral", "-")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")

_log = logging.getLogger("agentrt.backends.codex")


def _default_binary() -> str:
    return os.environ.get("CODEX_CLI") or "codex"


@attrs.frozen(kw_only=True)
class CodexOptions:
    """Everything one Codex agent is configured with. Build it with
    `CodexBackend.parse_options`, which validates every key and value."""

    binary: str = attrs.field(factory=_default_binary)
    cwd: str | None = None
    model: str | None = None
    sandbox: Sandbox | None = None
    approval: Approval | None = None
    full_auto: bool = False
    # -c key=value overrides; values are TOML-encoded on argv.
    config: Mapping[str, ConfigValue] = attrs.field(
        factory=dict, hash=False, repr=lambda c: repr(_shown("config", c))
    )
    profile: str | None = None
    # Sets CODEX_HOME for the child and makes "profile" the default env policy.
    codex_home: str | None = None
    env: Mapping[str, str] = attrs.field(
        factory=dict, hash=False, repr=lambda e: repr(_shown("env", e))
    )
    env_policy: EnvPolicy | None = None
    images: tuple[str, ...] = ()
    # A path, or a JSON schema object (written to a 0600 file for the turn).
    output_schema: str | JsonObject | None = attrs.field(default=None, hash=False)
    fork_session: bool = False
    # False: ``-c check_for_update_on_startup=false``, so the CLI does not look for (or
    # offer) a newer release; True leaves its configured behaviour. A ``config`` value wins.
    auto_update: bool = False
    extra_args: tuple[str, ...] = ()

    @property
    def effective_env_policy(self) -> EnvPolicy:
        """The explicit env policy, else ``profile`` iff a CODEX_HOME is named."""
        if self.env_policy is not None:
            return self.env_policy
        return default_env_policy(config_dir=self.codex_home or self.env.get("CODEX_HOME"))


def _flag_value(value: Any) -> str:
    # A leading dash would be read as another flag.
    if v.text(value).startswith("-"):
        raise v.Bad("cannot start with '-'")
    return value  # type: ignore[no-any-return]


def _full_auto(value: Any) -> bool:
    if v.boolean(value):
        raise v.Bad(
            "codex 0.171.0 has no --full-auto; use sandbox='workspace-write' "
            "(codex exec never stops to ask for approval)"
        )
    return False


def toml_value(value: Any) -> str:
    """``value`` as a TOML value, the way ``-c key=value`` parses it."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if not -(2**63) <= value < 2**63:
            raise v.Bad("TOML integers are 64-bit")
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        return repr(value) if math.isfinite(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, str):
        try:
            value.encode()
        except UnicodeEncodeError:
            raise v.Bad("a string must be valid Unicode (no lone surrogates)") from None
        # JSON's string escapes are TOML's basic-string escapes; TOML also wants DEL escaped.
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_toml_key(k)} = {toml_value(x)}" for k, x in value.items()) + "}"
    raise v.Bad(f"{type(value).__name__} has no TOML form (TOML has no null)")


def _toml_key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise v.Bad(f"table key {key!r} must be a non-empty string")
    return key if _BARE_KEY.fullmatch(key) else toml_value(key)


def _config(value: Any) -> dict[str, ConfigValue]:
    if not isinstance(value, Mapping):
        raise v.Bad("expected a mapping of dotted config keys to values")
    for key, item in value.items():
        if not isinstance(key, str) or not key or "=" in key or key.startswith("-"):
            raise v.Bad(f"config key {key!r} must be a non-empty string with no '=' or leading '-'")
        try:
            toml_value(item)
        except v.Bad as exc:
            raise v.Bad(f"config[{key!r}]: {exc}") from None
    return dict(value)


def _images(value: Any) -> tuple[str, ...]:
    images = v.paths(value)
    for image in images:
        # codex splits --image values on commas, so such a path cannot be passed at all.
        if "," in image:
            raise v.Bad(f"codex cannot take an image path containing a comma: {image!r}")
    return images


def _output_schema(value: Any) -> str | JsonObject:
    if isinstance(value, Mapping):
        try:
            return json.loads(json.dumps(value))  # type: ignore[no-any-return]
        except (TypeError, ValueError) as exc:
            raise v.Bad(f"a schema object must be JSON-serialisable ({exc})") from None
    try:
        return v.path(value)
    except v.Bad:
        raise v.Bad("expected a path to a JSON schema file, or a schema dict") from None


def _shown(key: str, value: Any) -> Any:
    """``value`` as an error or repr may show it: env values and secret-named config values
    may be credentials."""
    if key == "env" and isinstance(value, Mapping):
        return {name: REDACTED for name in value}
    if key == "config" and isinstance(value, Mapping):
        return _redacted(value)
    return value


def _redacted(value: Any, key: str = "") -> Any:
    if key and is_secret_name(key) and not _names_a_variable(key):
        return REDACTED
    if isinstance(value, Mapping):
        return {k: _redacted(x, str(k).rsplit(".", 1)[-1]) for k, x in value.items()}
    return value


def _names_a_variable(key: str) -> bool:
    # bearer_token_env_var, env_key: the value is the NAME of a variable that holds the secret.
    return key.endswith(("_env_var", "env_key"))


def secret_config_keys(config: Mapping[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys (nested tables included) whose names look like credentials."""
    found = []
    for key, value in config.items():
        dotted = f"{prefix}{key}"
        last = str(key).rsplit(".", 1)[-1]
        if is_secret_name(last) and not _names_a_variable(last):
            found.append(dotted)
        elif isinstance(value, Mapping):
            found += secret_config_keys(value, f"{dotted}.")
    return found


_CHECKS = {
    "binary": v.path,
    "cwd": v.path,
    "model": _flag_value,
    "sandbox": v.choice(get_args(Sandbox)),
    "approval": v.choice(get_args(Approval)),
    "full_auto": _full_auto,
    "config": _config,
    "profile": _flag_value,
    "codex_home": v.path,
    "env": v.env_mapping,
    "env_policy": v.choice(ENV_POLICIES),
    "images": _images,
    "output_schema": _output_schema,
    "fork_session": v.boolean,
    "auto_update": v.boolean,
    "extra_args": v.args_without(_RESERVED_FLAGS),
}
KNOWN_KEYS: tuple[str, ...] = tuple(_CHECKS)
_structure = v.make_parser(CodexOptions, _CHECKS, shown=_shown)


def parse_options(raw: Mapping[str, Any]) -> CodexOptions:
    """Validate ``raw`` into `CodexOptions`. A ``None`` value means "unset".

    Raises `agentrt.InvalidOptions` naming the first unknown key (with the closest known
    one), or the key, value and what is allowed for the first bad value. Logs a warning
    naming any ``config`` key that looks like a credential: ``-c`` overrides travel on argv,
    which every local user can read."""
    options = _structure(raw)
    if options.approval == "bypass" and options.sandbox not in (None, "danger-full-access"):
        raise InvalidOptions(
            "approval",
            "bypass",
            f"bypass runs commands without a sandbox; it contradicts sandbox={options.sandbox!r}",
        )
    if options.codex_home and "CODEX_HOME" in options.env:
        raise InvalidOptions("codex_home", options.codex_home, "env= also sets CODEX_HOME")
    secrets = secret_config_keys(options.config)
    if secrets:
        _log.warning(
            "codex config override(s) %s look like credentials: -c overrides travel on argv, "
            "readable by every local user. Use the *_env_var form (for example "
            "bearer_token_env_var) and pass the secret itself in env=",
            ", ".join(secrets),
        )
    return options

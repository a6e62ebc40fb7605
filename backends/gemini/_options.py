"""Gemini CLI backend options, validated up front into one frozen attrs class.

Checked against ``gemini --help`` and the settings schema of Gemini CLI 0.61.0.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any, Literal, get_args

import attrs

from agentrt.backend import ENV_POLICIES, REDACTED, EnvPolicy, InvalidOptions, default_env_policy

from .. import _validate as v

# --approval-mode's choices. Headless, "default" leaves out every tool that would ask
# (the shell, file edits): nobody is there to answer.
ApprovalMode = Literal["default", "auto_edit", "yolo", "plan"]
# security.auth.selectedType values a headless run accepts.
AuthType = Literal["gemini-api-key", "vertex-ai", "oauth-personal", "compute-default-credentials"]
JsonObject = Mapping[str, Any]

# Flags the backend owns: the translator reads stream-json, the prompt comes from stdin,
# the backend picks the session to resume and the approval mode.
_RESERVED_FLAGS = (
    "-p",
    "--prompt",
    "-i",
    "--prompt-interactive",
    "-o",
    "--output-format",
    "-r",
    "--resume",
    "--session-id",
    "--session-file",
    "-y",
    "--yolo",
    "--approval-mode",
    "--acp",
    "--experimental-acp",
    "-m",
    "--model",
    "-w",
    "--worktree",
)


def _default_binary() -> str:
    return os.environ.get("GEMINI_CLI") or "gemini"


@attrs.frozen(kw_only=True)
class GeminiOptions:
    """Everything one Gemini CLI agent is configured with. Build it with
    `GeminiBackend.parse_options`, which validates every key and value."""

    binary: str = attrs.field(factory=_default_binary)
    cwd: str | None = None
    model: str | None = None
    # None: "default" (see ApprovalMode).
    approval_mode: ApprovalMode | None = None
    # The CLI home (GEMINI_CLI_HOME: the CLI keeps .gemini/ under it). Named, it is the
    # backend's: its .gemini/settings.json is written each turn (see _settings), and the
    # default env policy is "profile".
    gemini_home: str | None = None
    auth_type: AuthType = "gemini-api-key"
    # general.maxAttempts: the CLI's attempts per model call (1-10; None: its default, 10,
    # which retries a 429 or 503 for minutes).
    max_attempts: int | None = None
    # More settings, merged over the backend's own in the named home's settings.json.
    settings: JsonObject = attrs.field(
        factory=dict, hash=False, repr=lambda value: repr(_shown("settings", value))
    )
    include_directories: tuple[str, ...] = ()
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
        return default_env_policy(config_dir=self.gemini_home or self.env.get("GEMINI_CLI_HOME"))


def _flag_value(value: Any) -> str:
    # A leading dash would be read as another flag.
    if v.text(value).startswith("-"):
        raise v.Bad("cannot start with '-'")
    return value  # type: ignore[no-any-return]


def _attempts(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 10:
        raise v.Bad("expected an integer from 1 to 10 (the CLI caps its attempts at 10)")
    return value


def _settings(value: Any) -> JsonObject:
    if not isinstance(value, Mapping):
        raise v.Bad("expected a mapping of Gemini CLI settings (as in its settings.json)")
    try:
        return json.loads(json.dumps(value))  # type: ignore[no-any-return]
    except (TypeError, ValueError) as exc:
        raise v.Bad(f"settings must be JSON-serialisable ({exc})") from None


def _directories(value: Any) -> tuple[str, ...]:
    directories = v.paths(value)
    for directory in directories:
        # The CLI splits --include-directories values on commas.
        if "," in directory:
            raise v.Bad(f"gemini cannot take a directory containing a comma: {directory!r}")
    return directories


def _shown(key: str, value: Any) -> Any:
    """``value`` as an error or repr may show it: env values and settings may be secrets."""
    if key in ("env", "settings") and isinstance(value, Mapping):
        return {name: REDACTED for name in value}
    return value


_CHECKS: dict[str, v.Check] = {
    "binary": v.path,
    "cwd": v.path,
    "model": _flag_value,
    "approval_mode": v.choice(get_args(ApprovalMode)),
    "gemini_home": v.path,
    "auth_type": v.choice(get_args(AuthType)),
    "max_attempts": _attempts,
    "settings": _settings,
    "include_directories": _directories,
    "env": v.env_mapping,
    "env_policy": v.choice(ENV_POLICIES),
    "extra_args": v.args_without(_RESERVED_FLAGS),
}
KNOWN_KEYS: tuple[str, ...] = tuple(_CHECKS)
_structure = v.make_parser(GeminiOptions, _CHECKS, shown=_shown)


def parse_options(raw: Mapping[str, Any]) -> GeminiOptions:
    """Validate ``raw`` into `GeminiOptions`. A ``None`` value means "unset".

    Raises `agentrt.InvalidOptions` naming the first unknown key (with the closest known
    one), or the key, value and what is allowed for the first bad value."""
    options = _structure(raw)
    v.same_as_env("gemini_home", options.gemini_home, options.env, "GEMINI_CLI_HOME")
    if options.gemini_home is None and (options.settings or options.max_attempts is not None):
        key = "settings" if options.settings else "max_attempts"
        raise InvalidOptions(
            key,
            _shown(key, getattr(options, key)),
            "the backend writes settings only into a CLI home of its own: name gemini_home",
        )
    if options.gemini_home is not None and not os.path.isabs(options.gemini_home):
        raise InvalidOptions("gemini_home", options.gemini_home, "expected an absolute path")
    return options

"""opencode backend options, validated up front into one frozen attrs class.

Checked against ``opencode run --help`` and the config schema of opencode 1.18.33
(``opencode-ai``).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

import attrs

from agentrt.backend import ENV_POLICIES, REDACTED, EnvPolicy, default_env_policy

from .. import _validate as v

JsonObject = Mapping[str, Any]

# Flags the backend owns: the translator reads --format json, the prompt comes on stdin,
# the backend picks the session and the model; a server of one's own is the warm mode's.
_RESERVED_FLAGS = (
    "--format",
    "-s",
    "--session",
    "-c",
    "--continue",
    "--fork",
    "--share",
    "-m",
    "--model",
    "--agent",
    "--title",
    "--auto",
    "--attach",
    "-p",
    "--password",
    "-u",
    "--username",
    "--port",
    "--dir",
    "-i",
    "--interactive",
    "--command",
)

_MODEL = re.compile(r"^[^\s/-][^\s/]*/\S+$")


def _default_binary() -> str:
    return os.environ.get("OPENCODE_CLI") or "opencode"


@attrs.frozen(kw_only=True)
class OpencodeOptions:
    """Everything one opencode agent is configured with. Build it with
    `OpencodeBackend.parse_options`, which validates every key and value."""

    binary: str = attrs.field(factory=_default_binary)
    cwd: str | None = None
    # provider/model, as --model takes it.
    model: str | None = None
    agent: str | None = None
    # The session's title: given, opencode makes no model call to write one.
    title: str = "agentrt"
    # --auto: tools whose permission is "ask" run unasked (those denied stay denied);
    # without it such a tool is refused, for nobody is there to answer.
    auto: bool = False
    # opencode's config (providers with their base URL, permissions, ...), merged over
    # the user's: passed in a 0600 file (OPENCODE_CONFIG), for it may hold API keys.
    config: JsonObject = attrs.field(
        factory=dict, hash=False, repr=lambda value: repr(_shown("config", value))
    )
    env: Mapping[str, str] = attrs.field(
        factory=dict, hash=False, repr=lambda value: repr(_shown("env", value))
    )
    env_policy: EnvPolicy | None = None
    extra_args: tuple[str, ...] = ()

    @property
    def effective_env_policy(self) -> EnvPolicy:
        """The explicit env policy, else ``profile`` iff opencode's data home is named
        (``XDG_DATA_HOME`` in ``env``)."""
        if self.env_policy is not None:
            return self.env_policy
        return default_env_policy(config_dir=self.env.get("XDG_DATA_HOME"))


def _model(value: Any) -> str:
    if not _MODEL.match(v.text(value)):
        raise v.Bad("expected provider/model (e.g. 'anthropic/claude-sonnet-4-5')")
    return value  # type: ignore[no-any-return]


def _flag_value(value: Any) -> str:
    # A leading dash would be read as another flag.
    if v.text(value).startswith("-"):
        raise v.Bad("cannot start with '-'")
    return value  # type: ignore[no-any-return]


def _config(value: Any) -> JsonObject:
    if not isinstance(value, Mapping):
        raise v.Bad("expected a mapping of opencode config (as in its opencode.json)")
    try:
        return json.loads(json.dumps(value))  # type: ignore[no-any-return]
    except (TypeError, ValueError) as exc:
        raise v.Bad(f"config must be JSON-serialisable ({exc})") from None


def _shown(key: str, value: Any) -> Any:
    """``value`` as an error or repr may show it: env values and the config (its API keys)
    may be secrets."""
    if key == "env" and isinstance(value, Mapping):
        return {name: REDACTED for name in value}
    if key == "config" and isinstance(value, Mapping):
        return REDACTED
    return value


def session_id_error(value: str) -> str | None:
    """Why ``value`` cannot be given to ``--session``, or None (opencode's ids are
    ``ses_`` and letters and digits)."""
    if not re.fullmatch(r"ses_[A-Za-z0-9]+", value):
        return "not an opencode session id (ses_ and letters and digits)"
    return None


_CHECKS: dict[str, v.Check] = {
    "binary": v.path,
    "cwd": v.path,
    "model": _model,
    "agent": _flag_value,
    "title": _flag_value,
    "auto": v.boolean,
    "config": _config,
    "env": v.env_mapping,
    "env_policy": v.choice(ENV_POLICIES),
    "extra_args": v.args_without(_RESERVED_FLAGS),
}
KNOWN_KEYS: tuple[str, ...] = tuple(_CHECKS)
_structure = v.make_parser(OpencodeOptions, _CHECKS, shown=_shown)


def parse_options(raw: Mapping[str, Any]) -> OpencodeOptions:
    """Validate ``raw`` into `OpencodeOptions`. A ``None`` value means "unset".

    Raises `agentrt.InvalidOptions` naming the first unknown key (with the closest known
    one), or the key, value and what is allowed for the first bad value."""
    return _structure(raw)

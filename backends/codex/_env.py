"""The child environment: a policy applied to ``os.environ``, then explicit values.

Stand-in with the names and signatures of ``agentrt._env`` (written for the Claude backend
at the same time); when both meet, this module goes and `_command` imports those instead.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Literal, get_args

EnvPolicy = Literal["inherit", "profile", "isolated"]
ENV_POLICIES: tuple[EnvPolicy, ...] = get_args(EnvPolicy)

# Credentials codex prefers over the login in its CODEX_HOME when they are set.
AMBIENT_AUTH_VARS = frozenset({"OPENAI_API_KEY", "CODEX_API_KEY"})
_ISOLATED = frozenset(
    {"PATH", "HOME", "LANG", "LANGUAGE", "SSL_CERT_FILE", "SSL_CERT_DIR", "NODE_EXTRA_CA_CERTS"}
    | {f"{p}_PROXY" for p in ("HTTP", "HTTPS", "ALL", "NO")}
    | {f"{p}_proxy" for p in ("http", "https", "all", "no")}
)


def default_env_policy(*, config_dir: str | None) -> EnvPolicy:
    """``profile`` when a CLI config directory is given, else ``inherit``."""
    return "profile" if config_dir else "inherit"


def child_env(
    policy: EnvPolicy,
    explicit: Mapping[str, str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """``policy`` applied to ``environ`` (default ``os.environ``), then ``explicit`` on top."""
    base = os.environ if environ is None else environ
    if policy == "inherit":
        env = dict(base)
    elif policy == "profile":
        env = {k: v for k, v in base.items() if k not in AMBIENT_AUTH_VARS}
    else:
        env = {k: v for k, v in base.items() if k in _ISOLATED or k.startswith("LC_")}
    env.update(explicit or {})
    return env

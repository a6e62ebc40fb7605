"""The environment a CLI child process gets: one of three policies, then explicit values.

``inherit``
    ``os.environ`` verbatim: the ambient credentials reach the child.
``profile``
    ``os.environ`` minus the ambient model-provider credentials and the variables that mark
    "running inside a Claude Code session". The CLI then authenticates from its own login
    or config directory. A stripped name is logged once (names only, never values), so a
    run that wanted the ambient key learns where it went.
``isolated``
    Only PATH, HOME, the locale, proxies and TLS trust settings: a run that is the same on
    every machine.

Explicit ``env`` is applied last, over whatever the policy produced, including a name the
policy just removed: that is how a per-agent credential replaces the ambient one.

The default is ``profile`` when the caller names a CLI config directory (pointing the CLI at
a profile is a statement of intent, and an inherited key that silently overrides that
profile is never what was meant), and ``inherit`` otherwise (the CLI's normal behaviour).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping
from typing import Literal, get_args

__all__ = [
    "AMBIENT_AUTH_VARS",
    "ENV_POLICIES",
    "EnvPolicy",
    "bypass_proxy",
    "child_env",
    "default_env_policy",
]

EnvPolicy = Literal["inherit", "profile", "isolated"]
ENV_POLICIES: tuple[EnvPolicy, ...] = get_args(EnvPolicy)

# Credentials a coding CLI prefers over its own login when they are set.
AMBIENT_AUTH_VARS = frozenset(
    {
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "CLAUDE_CODE_OAUTH_TOKEN",
        "OPENAI_API_KEY",
        "CODEX_API_KEY",
    }
)
# Set by a running Claude Code for its own children; a nested CLI must not inherit them.
_SESSION_VARS = frozenset({"CLAUDECODE", "CLAUDE_CODE_ENTRYPOINT", "CLAUDE_CODE_SSE_PORT"})

_ISOLATED_NAMES = frozenset(
    {
        "PATH",
        "HOME",
        "LANG",
        "LANGUAGE",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "NODE_EXTRA_CA_CERTS",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
    }
)

_log = logging.getLogger("agentrt.env")
# Each distinct set of stripped names is reported once per process, not once per turn:
# a warning that repeats every turn is noise, and noise gets filtered away wholesale.
_warned: set[frozenset[str]] = set()


def default_env_policy(*, config_dir: str | None) -> EnvPolicy:
    """``profile`` when a CLI config directory is given, else ``inherit``."""
    return "profile" if config_dir else "inherit"


def child_env(
    policy: EnvPolicy,
    explicit: Mapping[str, str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The complete environment for a child: ``policy`` applied to ``environ`` (default
    ``os.environ``), then ``explicit`` on top. Under ``profile``, logs once the names of the
    credentials it left out."""
    base = _os_environ() if environ is None else environ
    explicit = explicit or {}
    if policy == "inherit":
        env = dict(base)
    elif policy == "profile":
        dropped = (AMBIENT_AUTH_VARS | _SESSION_VARS) & base.keys()
        env = {k: v for k, v in base.items() if k not in dropped}
        _warn_stripped(frozenset(dropped - explicit.keys()))
    elif policy == "isolated":
        env = {k: v for k, v in base.items() if k in _ISOLATED_NAMES or k.startswith("LC_")}
    else:
        raise ValueError(f"unknown env policy {policy!r}; expected one of {ENV_POLICIES}")
    env.update(explicit)
    return env


# os.environ as it was last read (its bytes, as the process holds them) and decoded: a CLI
# turn copies the environment every spawn, and a copy of os.environ decodes every name and
# value through two Python calls each.
_environ_read: tuple[dict[bytes, bytes], dict[str, str]] | None = None


def _os_environ() -> Mapping[str, str]:
    """``os.environ`` as a dict, decoded only when it changed since the last call."""
    global _environ_read
    # CPython's os.environ keeps the process's environment in ``_data`` (bytes on POSIX);
    # compared with the copy, it says in one C call whether anything changed.
    data = getattr(os.environ, "_data", None)
    if not isinstance(data, dict) or os.name != "posix":
        return os.environ
    read = _environ_read
    if read is None or read[0] != data:
        raw = dict(data)
        encoding, errors = sys.getfilesystemencoding(), "surrogateescape"
        decoded = {k.decode(encoding, errors): v.decode(encoding, errors) for k, v in raw.items()}
        read = _environ_read = (raw, decoded)
    return read[1]


def bypass_proxy(
    host: str, explicit: Mapping[str, str], *, environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """``NO_PROXY`` and ``no_proxy`` (the same value) for a child that must reach ``host``
    directly: the hosts it would bypass anyway (from ``explicit``, else ``environ``, default
    ``os.environ``), plus ``host``. For a loopback server of the runtime's: through a proxy
    the CLI (Claude Code honours ``HTTP(S)_PROXY`` even for 127.0.0.1) would not reach it,
    and the proxy would see the credential it sends."""
    base = os.environ if environ is None else environ
    hosts: list[str] = []
    for name in ("NO_PROXY", "no_proxy"):
        for entry in explicit.get(name, base.get(name, "")).split(","):
            if entry.strip() and entry.strip() not in hosts:
                hosts.append(entry.strip())
    if host not in hosts:
        hosts.append(host)
    value = ",".join(hosts)
    return {"NO_PROXY": value, "no_proxy": value}


def _warn_stripped(names: frozenset[str]) -> None:
    if not names or names in _warned:
        return
    _warned.add(names)
    _log.warning(
        "env_policy='profile': not passing %s to the CLI (it would override the CLI's own "
        "login); pass env_policy='inherit', or set the variable in env=, to keep it",
        ", ".join(sorted(names)),
    )

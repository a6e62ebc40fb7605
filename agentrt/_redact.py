"""Redaction of credential-shaped text before it is stored, logged or raised."""

from __future__ import annotations

import re
from collections.abc import Mapping

REDACTED = "[REDACTED]"

# "auth" alone, not "author"; "authorization" is a header that carries credentials.
_SECRET_WORD = r"(?:key|token|secret|passw(?:or)?d|credential|authorization|auth(?![a-z]))"
_SECRET_NAME = re.compile(_SECRET_WORD, re.IGNORECASE)

# Each pattern's whole match is replaced, except the ones whose group 1 is a prefix to keep.
_VALUE_PATTERNS = (
    re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{16,}"),
    re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}"),
)
_PREFIX_PATTERNS = (
    re.compile(r"(\b[Bb]earer\s+)[A-Za-z0-9._~+/\-]+=*"),
    # key=value, key: value, "key": "value" where the key names a secret. The name is one
    # possessive run that starts where a run of name characters starts, so each character
    # is scanned a bounded number of times (stderr tails are untrusted input).
    re.compile(
        r"""(?<![A-Za-z0-9_.\-])(["']?(?=[A-Za-z0-9_.\-]*?"""
        + _SECRET_WORD
        + r""")[A-Za-z0-9_.\-]++["']?\s*+[=:]\s*+["']?)[^\s"',;&}]+""",
        re.IGNORECASE,
    ),
)


def redact(text: str) -> str:
    """Replace credential-shaped substrings of ``text`` with ``[REDACTED]``."""
    for pattern in _VALUE_PATTERNS:
        text = pattern.sub(REDACTED, text)
    for pattern in _PREFIX_PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def is_secret_name(name: str) -> bool:
    """Whether an env var or option key names a secret (``ANTHROPIC_API_KEY``, ``token``...)."""
    return _SECRET_NAME.search(name) is not None


def redact_mapping(values: Mapping[str, str]) -> dict[str, str]:
    """A copy with every secret-named key's value replaced, other values redacted as text."""
    return {k: REDACTED if is_secret_name(k) else redact(v) for k, v in values.items()}

"""Redaction of credential-shaped text before it is stored, logged or raised."""

from __future__ import annotations

import re
from collections.abc import Mapping

REDACTED = "[REDACTED]"

# A name is secret when its LAST word is one of these ("api_key", "AUTH_TOKEN", "apiKey",
# "client_secret"), so counts and limits about secrets are not ("input_tokens",
# "max_tokens", "token_count"), nor words that merely contain one ("keyboard", "monkey").
# A few compounds are written as one word ("apikey", "accesstoken"). "auth" alone, not
# "author"; "authorization" is a header that carries credentials.
_SECRET_WORD = re.compile(
    r"(?:api|access|auth|bearer|client|id|private|refresh|secret|session)?(?:key|token|secret)"
    r"|secrets|passw(?:or)?ds?|passphrase|credentials?|authorization|auth"
)
# Words of a name: runs of lower case (an optional capital first: camelCase), runs of
# capitals not followed by lower case (ACRONYMS, SHOUTING_CASE). Digits and separators
# ("_", "-", ".") are not words, so "api_key_2" ends with "key".
_WORDS = re.compile(r"[A-Z]++(?![a-z])|[A-Z]?[a-z]++")

# Token shapes (after gitleaks' rules), each match replaced whole. Each starts with a literal
# and a run that either matches or fails within its fixed minimum, so a scan stays linear.
# Each is paired with a substring every match contains: a text without it is not scanned
# (a `str` search is far cheaper than a regex scan, and most texts hold none of them).
_VALUE_PATTERNS = (
    ("sk-", re.compile(r"\bsk-[A-Za-z0-9_\-]{8,}")),
    ("gh", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{16,}")),
    ("IA", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    ("eyJ", re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}")),
    ("xox", re.compile(r"\bxox[abprs]-[A-Za-z0-9\-]{10,}")),
    ("AIza", re.compile(r"\bAIza[A-Za-z0-9_\-]{35}")),  # Google API key
    ("k_", re.compile(r"\b[rs]k_(?:live|test|prod)_[A-Za-z0-9]{10,}")),  # Stripe secret, restricted
    ("npm_", re.compile(r"\bnpm_[A-Za-z0-9]{36}")),
    ("glpat-", re.compile(r"\bglpat-[A-Za-z0-9_\-]{20,}")),  # GitLab
    ("pypi-", re.compile(r"\bpypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}")),
    ("hf_", re.compile(r"\bhf_[A-Za-z0-9]{34,}")),  # Hugging Face
)
# These keep their group 1 and replace the rest of the match.
_PREFIXED_PATTERNS = (
    # A PEM private key: the BEGIN line stays, the body goes, up to the END line or to where
    # the body's characters (base64, its own "Proc-Type: 4,ENCRYPTED" lines, escaped
    # newlines) stop: a stderr tail may have cut the key. The body never holds "-----", so
    # one block's scan ends where the next one starts.
    (
        "-----BEGIN",
        re.compile(
            r"(-----BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)"
            r"(?:[A-Za-z0-9+/=\s\\:,.]|-(?!----))*+"
            r"(?:-----END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----)?"
        ),
    ),
    # scheme://user:password@host: the user stays (which account), the password goes. A
    # scheme starts where a run of scheme characters starts, so each run is scanned once.
    (
        "://",
        re.compile(
            r"((?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*+://[^\s:/?#@\[\]]*+:)[^\s/?#@]++(?=@)"
        ),
    ),
    ("earer", re.compile(r"(\b[Bb]earer\s+)[A-Za-z0-9._~+/\-]+=*")),
)

# Every substring the scan below looks for: a text with none of them has nothing to redact.
_NEEDED = (
    *(needed for needed, _ in _VALUE_PATTERNS),
    *(needed for needed, _ in _PREFIXED_PATTERNS),
    "=",
    ":",
)

# key=value, key: value, "key": "value". The name is one possessive run that starts where a
# run of name characters starts, so each character is scanned a bounded number of times
# (stderr tails are untrusted input); whether it names a secret is decided in Python, and
# only a secret's value is consumed, so "url=https://h/?api_key=v" still finds api_key.
_ASSIGNMENT = re.compile(r"""(?<![A-Za-z0-9_.\-])["']?+([A-Za-z0-9_.\-]++)["']?+\s*+[=:]\s*+""")
# An HTTP auth scheme is part of the value: "Authorization: Basic <credentials>".
_VALUE = re.compile(r"""["']?+(?:(?i:basic|bearer|digest|token)\s++)?+[^\s"',;&}]++""")


def is_secret_name(name: str) -> bool:
    """Whether an env var, option key or header names a secret: its last word is one
    (``ANTHROPIC_API_KEY``, ``x-api-key``, ``apiKey``, ``access_token``, ``password``,
    ``Authorization``), not ``input_tokens``, ``max_tokens``, ``token_count`` or ``keyboard``.
    """
    words = _WORDS.findall(name)
    return bool(words) and _SECRET_WORD.fullmatch(words[-1].lower()) is not None


def _redact_assignments(text: str) -> str:
    parts: list[str] = []
    done = 0
    pos = 0
    while (match := _ASSIGNMENT.search(text, pos)) is not None:
        pos = match.end()
        if not is_secret_name(match.group(1)):
            continue
        value = _VALUE.match(text, pos)
        if value is None:
            continue
        quote = text[pos] if text[pos] in "\"'" else ""
        parts += (text[done:pos], quote, REDACTED)
        done = pos = value.end()
    if not parts:
        return text
    parts.append(text[done:])
    return "".join(parts)


def redact(text: str) -> str:
    """Replace credential-shaped substrings of ``text`` with ``[REDACTED]``."""
    # Most texts (prompts, answers) hold none of the substrings below: the same checks, made
    # in one C-level pass rather than a Python loop's 16 steps (a scripted ask redacts two
    # texts for its turn history: bench/README.md, "Seventh pass").
    if not any(map(text.__contains__, _NEEDED)):
        return text
    for needed, pattern in _VALUE_PATTERNS:
        if needed in text:
            text = pattern.sub(REDACTED, text)
    for needed, pattern in _PREFIXED_PATTERNS:
        if needed in text:
            text = pattern.sub(_keep_prefix, text)
    # An assignment has its = or : (most prompts and answers have neither).
    if "=" in text or ":" in text:
        return _redact_assignments(text)
    return text


def _keep_prefix(match: re.Match[str]) -> str:
    return match.group(1) + REDACTED


def redact_mapping(values: Mapping[str, str]) -> dict[str, str]:
    """A copy with every secret-named key's value replaced, other values redacted as text."""
    return {k: REDACTED if is_secret_name(k) else redact(v) for k, v in values.items()}

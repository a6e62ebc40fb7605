"""Who may use the console: the token (in the URL of the first visit, then an HttpOnly,
SameSite=Strict cookie), and for actions a CSRF token the pages carry, so that another
site open in the same browser can neither read the console nor act through it."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import secrets
from collections.abc import Iterable
from http.cookies import CookieError, SimpleCookie
from urllib.parse import parse_qs

import attrs

from .._errors import InvalidOptions

COOKIE = "agentrt_console"
CSRF_HEADER = b"x-agentrt-csrf"


def new_token() -> str:
    return secrets.token_urlsafe(32)


def parse_bind(bind: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` for IPv6) -> host and port; `InvalidOptions` otherwise."""
    host, sep, port = bind.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise InvalidOptions("bind", bind, "must be HOST:PORT, e.g. 127.0.0.1:8765 (0: any port)")
    return host.removeprefix("[").removesuffix("]"), int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a host name other than localhost may resolve to anything


def check_token(token: str, host: str) -> None:
    """Refuse a console without a token anywhere but loopback."""
    if not token and not is_loopback(host):
        raise InvalidOptions(
            "token",
            "",
            f"a console bound to {host} (beyond loopback) needs a token: "
            "leave the token out and one is made",
        )


@attrs.frozen(repr=False)
class Gate:
    """The token every request needs ("" admits everyone: loopback only)."""

    token: str

    @property
    def csrf(self) -> str:
        """The CSRF token of this console's pages: derived from the token, so a page from
        another origin, which cannot read the console's pages, cannot know it."""
        return hmac.new(self.token.encode(), b"agentrt-console-csrf", hashlib.sha256).hexdigest()

    def from_query(self, query_string: bytes) -> bool:
        """Whether the URL carries the right token (the first visit)."""
        values = parse_qs(query_string.decode("latin-1")).get("token", [])
        return len(values) == 1 and self._matches(values[0])

    def admits(self, headers: Iterable[tuple[bytes, bytes]], query_string: bytes) -> bool:
        if not self.token:
            return True
        return self.from_query(query_string) or any(
            self._matches(value) for value in _cookie_values(headers)
        )

    def csrf_ok(self, headers: Iterable[tuple[bytes, bytes]]) -> bool:
        sent = [v for k, v in headers if k == CSRF_HEADER]
        return len(sent) == 1 and hmac.compare_digest(sent[0], self.csrf.encode())

    def _matches(self, value: str) -> bool:
        return hmac.compare_digest(value.encode(), self.token.encode())

    def cookie(self, path: str) -> bytes:
        return f"{COOKIE}={self.token}; Path={path}; HttpOnly; SameSite=Strict".encode()


def _cookie_values(headers: Iterable[tuple[bytes, bytes]]) -> list[str]:
    found = []
    for key, value in headers:
        if key != b"cookie":
            continue
        jar: SimpleCookie = SimpleCookie()
        try:
            jar.load(value.decode("latin-1"))
        except CookieError:
            continue
        if COOKIE in jar:
            found.append(jar[COOKIE].value)
    return found

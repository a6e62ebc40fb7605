"""Checks of the public API's arguments, made before anything runs.

A wrong type raises `TypeError` naming the argument; a value the runtime cannot use
raises `InvalidOptions` (names, working directories) or, for a prompt, `ValueError`: a
prompt is not an option, and an empty one is a plain bad argument, as in the stdlib.
"""

from __future__ import annotations

import os
import re
import stat
import unicodedata
from typing import Any

from ._agent import Agent
from ._errors import InvalidOptions
from ._requests import Ref

# Longest agent name: it is a store key and a column of `agentrt sessions`.
MAX_NAME = 255
# Unicode categories refused in names: each breaks a terminal line, a log record or the
# store's UTF-8.
_UNPRINTABLE = {
    "Cc": "a control character",
    "Cs": "a lone surrogate",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
}
# A UTF-16 surrogate code point standing alone in a str (from a JSON escape, say).
_SURROGATE = re.compile("[\ud800-\udfff]")


def wrong_type(argument: str, expected: str, value: object) -> TypeError:
    return TypeError(f"{argument} must be {expected}, not {type(value).__name__}")


def check_agent(agent: object) -> None:
    """An `Agent` subclass, an instance, or a zero-argument factory (checked when called)."""
    if isinstance(agent, Agent):
        return
    if (isinstance(agent, type) and not issubclass(agent, Agent)) or not callable(agent):
        raise wrong_type(
            "agent", "an agentrt.Agent subclass, an Agent instance or a factory of one", agent
        )


def check_name(name: object) -> str:
    """A name for a new agent: any non-empty string of at most ``MAX_NAME`` printable
    characters (spaces, ``/``, ``..`` and non-ASCII included)."""
    if not isinstance(name, str):
        raise wrong_type("name", "a str", name)
    if not name:
        raise InvalidOptions("name", name, "must not be empty")
    if len(name) > MAX_NAME:
        # Its start is enough to recognise it; the whole would swamp the message.
        raise InvalidOptions(
            "name", f"{name[:40]}...", f"is {len(name)} characters long; at most {MAX_NAME}"
        )
    for char in name:
        what = _UNPRINTABLE.get(unicodedata.category(char))
        if what is not None:
            raise InvalidOptions("name", name, f"contains U+{ord(char):04X}, {what}")
    return name


def unstorable(text: str) -> str | None:
    """Why no store, routed call or CLI's stdin takes ``text`` alike, or None: a NUL
    (PostgreSQL's text refuses it) or a lone surrogate (no UTF-8 holds it)."""
    if "\x00" in text:
        return f"contains U+0000 (NUL) at {text.index(chr(0))}"
    if not text.isascii() and (found := _SURROGATE.search(text)) is not None:
        where = found.start()
        return f"contains U+{ord(text[where]):04X}, a lone surrogate, at {where}: not UTF-8 text"
    return None


def check_prompt(prompt: object, argument: str = "prompt") -> str:
    """``prompt``, a text for the model; its errors name it ``argument`` (``steer``'s is
    ``text``). One no store takes alike (`unstorable`) is refused on every store."""
    if not isinstance(prompt, str):
        raise wrong_type(argument, "a str", prompt)
    if not prompt:
        raise ValueError(f"{argument} must not be empty")
    if prompt.isspace():  # stops at the first other character: no copy of a long prompt
        raise ValueError(f"{argument} must not be blank: {prompt[:40]!r}")
    # The C-level look first: an ASCII prompt without a NUL costs an ask no Python call.
    if ("\x00" in prompt or not prompt.isascii()) and (why := unstorable(prompt)) is not None:
        raise ValueError(f"{argument} {why}")
    return prompt


def check_ref(ref: object) -> Ref:
    if not isinstance(ref, Ref):
        raise wrong_type("ref", "an agentrt.Ref (from tell)", ref)
    return ref


def check_directory(key: str, path: Any) -> str:
    """``path`` if it names a directory, else `InvalidOptions` saying what it is instead."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise InvalidOptions(key, path, "does not exist") from None
    except OSError as exc:
        raise InvalidOptions(key, path, f"cannot be used: {exc.strerror}") from exc
    if not stat.S_ISDIR(mode):
        raise InvalidOptions(key, path, "is not a directory")
    return str(path)

"""The text of a turn's current segment: what ``Response.text`` and ``final_message`` are
built from.

A segment is the text since the previous terminal result (a CLI may print several results
in one turn; the last one's segment is the answer). Text arrives as many small deltas. A
str per delta costs a header besides its text for as long as the turn runs (megabytes
over a hundred long turns: bench/README.md), so the deltas of each read are folded into
one UTF-8 buffer (lone surrogates passed through), and a closed segment stays UTF-8 in
the Response until its text is read (a str of non-ASCII text takes 2-4 bytes a character).
"""

from __future__ import annotations

from ._events import TEXT_CODEC as _CODEC


class SegmentText:
    """Deltas go to ``parts`` (appended directly: it is the hot path); `fold` after each
    read; `end_message` at a message boundary."""

    __slots__ = ("_folded", "_last_start", "_message_start", "parts")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self._folded = bytearray()
        # Where the open message starts in ``_folded``, and where the last complete one did
        # (it ends where the open one starts: decoded only if asked for, as few turns are).
        self._message_start = 0
        self._last_start = 0

    def fold(self) -> None:
        if self.parts:
            self._folded += "".join(self.parts).encode(*_CODEC)
            self.parts.clear()

    def end_message(self) -> None:
        """The text so far ends a message."""
        self.fold()
        self._last_start = self._message_start
        self._message_start = len(self._folded)

    def retract(self, text: str) -> None:
        """Take ``text`` back from the end of the open message; text that does not end it
        is not ours to take back, so nothing is taken."""
        self.fold()
        data = text.encode(*_CODEC)
        if data and self._folded.endswith(data):
            start = len(self._folded) - len(data)
            if start >= self._message_start:
                del self._folded[start:]

    def last_message(self) -> str:
        """The open message if there is one, else the last complete one."""
        self.fold()
        folded = self._folded
        if self._message_start < len(folded):
            return folded[self._message_start :].decode(*_CODEC)
        return folded[self._last_start : self._message_start].decode(*_CODEC)

    def close(self) -> tuple[bytes, str]:
        """End the segment: its text (UTF-8) and its last message; the next starts empty."""
        last = self.last_message()
        # bytes, to go into the Response as is: no spare capacity, and immutable.
        text = bytes(self._folded)
        self._folded = bytearray()
        self._message_start = self._last_start = 0
        return text, last

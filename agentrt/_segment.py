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

# Between two messages of a segment, as a reader sees them apart (the CLIs' own displays).
MESSAGE_BREAK = b"\n\n"


class SegmentText:
    """Deltas go to ``parts`` (appended directly: it is the hot path); `fold` after each
    read; `end_message` at a message boundary. The messages are joined by `MESSAGE_BREAK`,
    written when the next message's first text arrives (a boundary that ends the segment,
    or one no text follows, adds nothing)."""

    __slots__ = ("_break_at", "_folded", "_last", "_message_start", "_open_break", "parts")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self._folded = bytearray()
        # Where the open message starts in ``_folded``, and where the last complete one
        # starts and ends (decoded only if asked for, as few turns are).
        self._message_start = 0
        self._last = (0, 0)
        # A message ended and the next has no text yet: its first text writes the break.
        self._open_break = False
        # Where the break before the open message starts, if it has one.
        self._break_at: int | None = None

    def fold(self) -> None:
        if not self.parts:
            return
        data = "".join(self.parts).encode(*_CODEC)
        self.parts.clear()
        if data and self._open_break:
            self._break_at = len(self._folded)
            self._folded += MESSAGE_BREAK
            self._message_start = len(self._folded)
            self._open_break = False
        self._folded += data

    def end_message(self) -> None:
        """The text so far ends a message (an empty one ends none)."""
        self.fold()
        if len(self._folded) > self._message_start:
            self._last = (self._message_start, len(self._folded))
            self._message_start = len(self._folded)
            self._open_break = True
            self._break_at = None

    def retract(self, text: str) -> None:
        """Take ``text`` back from the end of the open message; text that does not end it
        is not ours to take back, so nothing is taken."""
        self.fold()
        data = text.encode(*_CODEC)
        if data and self._folded.endswith(data):
            start = len(self._folded) - len(data)
            if start >= self._message_start and not self._open_break:
                del self._folded[start:]
                if start == self._message_start and self._break_at is not None:
                    # The open message is empty again: so is the break before it.
                    del self._folded[self._break_at :]
                    self._message_start = self._break_at
                    self._break_at = None
                    self._open_break = True

    def last_message(self) -> str:
        """The open message if there is one, else the last complete one."""
        self.fold()
        folded = self._folded
        if self._message_start < len(folded):
            return folded[self._message_start :].decode(*_CODEC)
        start, end = self._last
        return folded[start:end].decode(*_CODEC)

    def close(self) -> tuple[bytes, str]:
        """End the segment: its text (UTF-8) and its last message; the next starts empty."""
        last = self.last_message()
        # bytes, to go into the Response as is: no spare capacity, and immutable.
        text = bytes(self._folded)
        self._folded = bytearray()
        self._message_start = 0
        self._last = (0, 0)
        self._open_break = False
        self._break_at = None
        return text, last

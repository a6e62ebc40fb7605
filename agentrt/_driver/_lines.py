"""Splitting a byte stream into newline-terminated lines, with a cap on one line's size."""

from __future__ import annotations


class LineTooLong(Exception):
    """One line grew past the cap; ``size`` is how many bytes of it had arrived."""

    def __init__(self, size: int, limit: int) -> None:
        self.size = size
        self.limit = limit
        super().__init__(f"a line of more than {limit:,} bytes ({size:,} bytes without a newline)")


class LineSplitter:
    """Feed chunks, get complete lines (without the newline).

    The partial line is the only thing kept between chunks, so memory grows only as far as
    the longest line in flight needs, and an over-long line is refused as soon as it crosses
    the cap rather than after it has been read whole.
    """

    def __init__(self, max_line_bytes: int) -> None:
        self._max = max_line_bytes
        self._partial = bytearray()

    def feed(self, chunk: bytes) -> list[bytes]:
        lines = chunk.split(b"\n")
        tail = lines.pop()
        if lines:
            if self._partial:
                self._partial += lines[0]
                lines[0] = bytes(self._partial)
                self._partial.clear()
            if len(lines[0]) > self._max:
                raise LineTooLong(len(lines[0]), self._max)
            if len(chunk) > self._max:  # only then can a line inside the chunk be too long
                for line in lines:
                    if len(line) > self._max:
                        raise LineTooLong(len(line), self._max)
        self._partial += tail
        if len(self._partial) > self._max:
            raise LineTooLong(len(self._partial), self._max)
        return lines

    @property
    def pending(self) -> bool:
        """Whether part of a line waits for its newline."""
        return bool(self._partial)

    def finish(self) -> bytes:
        """The bytes after the last newline (a final line the writer did not terminate)."""
        rest = bytes(self._partial)
        self._partial.clear()
        return rest

"""What a call leaves allocated, as tracemalloc counts it, by this thread alone.

tracemalloc counts the allocations of every thread, and in a parallel run the worker's
messaging thread (execnet's) receives and sends while a test measures: a bound of a few
hundred bytes failed by 77 that way. Here each trace keeps its stack, and only the ones made
below the call are counted.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Deep enough that the frame making the call is on the stack of anything it allocates.
_FRAMES = 64


def held_after(call: Callable[[], T]) -> tuple[T, int]:
    """``call()``'s result, and how many bytes that it allocated are still held."""
    tracemalloc.start(_FRAMES)
    try:
        result = _below(call)
        snapshot = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    line = _below.__code__.co_firstlineno + 1
    ours = tracemalloc.Filter(True, __file__, lineno=line, all_frames=True)
    return result, sum(trace.size for trace in snapshot.filter_traces([ours]).traces)


def _below(call: Callable[[], T]) -> T:
    return call()  # the line on the stack of every trace that counts

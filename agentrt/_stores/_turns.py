"""Whose turn it is on a store's one connection: first come, first served, except that an
urgent call goes before every ordinary one waiting.

A runtime's lease renewals are the urgent calls. Its agents' writes (claims, checkpoints,
transcripts, settlements) queue on the same connection; in arrival order, a renewal made
while a busy runtime's agents have a few dozen writes waiting waits for all of them, and
on a loaded machine that passes half the lease's ttl, so the fence stops every agent of a
runtime that is alive and well (and their takeover makes more writes still). Going first,
a renewal waits only for the call in flight.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import attrs
import trio


@attrs.define(eq=False)
class Turns:
    """One holder at a time; waiters in arrival order, urgent ones before the rest.

    Cancellation: waiting is cancellable; a turn handed over is taken (trio's
    ``ParkingLot`` hands it to a task that cannot be cancelled out of it any more)."""

    _held: bool = False
    _urgent: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot)
    _ordinary: trio.lowlevel.ParkingLot = attrs.field(factory=trio.lowlevel.ParkingLot)

    @asynccontextmanager
    async def turn(self, *, urgent: bool = False) -> AsyncIterator[None]:
        """Hold the turn for the block, ``urgent`` ahead of the ordinary waiters."""
        await trio.lowlevel.checkpoint_if_cancelled()
        if self._held:  # (nobody waits while it is free)
            await (self._urgent if urgent else self._ordinary).park()  # handed over held
        else:
            self._held = True
            await trio.lowlevel.cancel_shielded_checkpoint()
        try:
            yield
        finally:
            if self._urgent:
                self._urgent.unpark()
            elif self._ordinary:
                self._ordinary.unpark()
            else:
                self._held = False

"""Removing an agent's failover spec from the store, as its lease is given up or it is
stopped on purpose (so no runtime hosting agents starts it again)."""

from __future__ import annotations

import logging

from .._errors import StoreError
from .._stores._protocols import SpecStore

logger = logging.getLogger("agentrt")


async def forget_spec(store: SpecStore | None, name: str) -> None:
    """Remove the spec of an agent being stopped on purpose (a store without specs has
    none); a store that fails is logged (a host may then start the agent again), and the
    stop goes on."""
    if store is None:
        return
    try:
        await store.save_spec(name, None)
    except StoreError as exc:
        logger.warning("agent %r: its failover spec could not be removed (%s)", name, exc)

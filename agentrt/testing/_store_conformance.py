"""The store conformance kit: the checks every agentrt store passes, as plain async calls
(no test framework needed), so that a store of one's own (Redis, DynamoDB, ...) proves it
behaves as agentrt's own stores do.

Each `StoreCheck` needs one capability protocol of `agentrt.store` (``requires``) and is
skipped on a store without it. A check opens its handles from a `StoreHarness`, which
makes handles on one set of data, empty at first: give each check a harness of its own.
"""

from __future__ import annotations

# Imported for their checks, which register in this order (the core first).
from . import (  # noqa: F401
    _conformance_core,
    _conformance_leases,
    _conformance_records,
    _conformance_request_machine,
    _conformance_requests,
    _conformance_schedules,
)
from ._conformance_kit import _CHECKS, StoreCheck, StoreHarness


def store_conformance(harness: StoreHarness) -> tuple[StoreCheck, ...]:
    """Every conformance check, on ``harness``; run each on a harness of its own."""
    return tuple(
        StoreCheck(name, requires, harness, body, needs) for name, requires, body, needs in _CHECKS
    )

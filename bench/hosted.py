"""The agent class of the failover benchmark, in a module of its own so that its stored
spec (``bench.hosted:Parked``) imports in every program, the one run as ``__main__`` too."""

from __future__ import annotations

import agentrt


class Parked(agentrt.Agent):
    """Passes its options to the backend, as `agentrt.Agent` does."""

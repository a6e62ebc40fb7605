"""The agent class of the failover tests and bench: top level of an importable module, so
its spec in the store names it as ``hosted_agent:Hosted`` for another program to import."""

from __future__ import annotations

import agentrt


class Hosted(agentrt.Agent):
    """Passes its options to the backend, as `agentrt.Agent` does."""

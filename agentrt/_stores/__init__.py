"""agentrt's stores layer (L2): the session stores by capability; calls routed by
PostgreSQL."""

"""agentrt's cluster layer (L3): several runtimes on one store: leases, reaper, failover
specs."""

"""agentrt's driver layer (L1): a CLI process, its tree and cgroup, process slots, runtime
ids."""

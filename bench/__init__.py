"""Benchmarks, not timed tests: agentrt vs claude-agent-sdk vs the floor. Run bench/run."""

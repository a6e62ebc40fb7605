"""Claude Code's stream-json protocol, shared by the CLIs that speak it (Qwen Code): its
frames translated to events, and the control protocol of a live process; exported to the
backends by `agentrt.backend`."""

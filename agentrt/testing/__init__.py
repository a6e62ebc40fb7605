"""Test helpers for agentrt users: scripted backends, fake CLIs, fake model APIs."""

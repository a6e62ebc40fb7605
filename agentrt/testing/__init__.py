"""Test helpers for agentrt users: scripted backends, fake CLIs, fake model APIs."""

from .fake_cli import fake_cli_argv as fake_cli_argv
from .fake_cli import fake_cli_executable as fake_cli_executable

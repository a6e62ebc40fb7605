"""Test helpers for agentrt users: scripted backends, fake CLIs, fake model APIs."""

from ._scripted import Call as Call
from ._scripted import Exit as Exit
from ._scripted import Fail as Fail
from ._scripted import Gate as Gate
from ._scripted import Raise as Raise
from ._scripted import ScriptedBackend as ScriptedBackend
from ._scripted import ScriptedOptions as ScriptedOptions
from ._scripted import Sleep as Sleep
from ._scripted import reply as reply
from .fake_cli import fake_cli_argv as fake_cli_argv
from .fake_cli import fake_cli_executable as fake_cli_executable

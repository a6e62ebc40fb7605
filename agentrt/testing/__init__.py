"""Test helpers for agentrt users: scripted backends, fake CLIs, fake model APIs."""

from ._fake_anthropic import AnthropicCutStream as AnthropicCutStream
from ._fake_anthropic import AnthropicError as AnthropicError
from ._fake_anthropic import AnthropicHang as AnthropicHang
from ._fake_anthropic import AnthropicReply as AnthropicReply
from ._fake_anthropic import AnthropicScript as AnthropicScript
from ._fake_anthropic import AnthropicStreamError as AnthropicStreamError
from ._fake_anthropic import AnthropicText as AnthropicText
from ._fake_anthropic import AnthropicToolUse as AnthropicToolUse
from ._fake_anthropic import FakeAnthropic as FakeAnthropic
from ._fake_anthropic import RecordedRequest as RecordedRequest
from ._fake_anthropic import open_fake_anthropic as open_fake_anthropic
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

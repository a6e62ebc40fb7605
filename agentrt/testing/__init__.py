"""Test helpers for agentrt users: scripted backends, fake CLIs, fake model APIs."""

from ._fake_openai import FAKE_OPENAI_KEY_VAR as FAKE_OPENAI_KEY_VAR
from ._fake_openai import FakeOpenAI as FakeOpenAI
from ._fake_openai import OpenAIError as OpenAIError
from ._fake_openai import OpenAIFunctionCall as OpenAIFunctionCall
from ._fake_openai import OpenAIHang as OpenAIHang
from ._fake_openai import OpenAIItem as OpenAIItem
from ._fake_openai import OpenAIMessage as OpenAIMessage
from ._fake_openai import OpenAIReply as OpenAIReply
from ._fake_openai import OpenAIRequest as OpenAIRequest
from ._fake_openai import OpenAIScript as OpenAIScript
from ._fake_openai import OpenAIUsage as OpenAIUsage
from ._fake_openai import open_fake_openai as open_fake_openai

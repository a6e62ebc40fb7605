"""The Qwen Code backend: options, argv, its stream-json dialect, failure markers."""

from ._backend import QwenBackend as QwenBackend
from ._options import ApprovalMode as ApprovalMode
from ._options import AuthType as AuthType
from ._options import QwenOptions as QwenOptions
from ._translate import QwenTranslator as QwenTranslator

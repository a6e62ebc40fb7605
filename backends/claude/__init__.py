"""The Claude Code backend: options, argv, stream-json translation, failure markers."""

from ._backend import ClaudeBackend as ClaudeBackend
from ._command import SYSTEM_PROMPT_ARGV_LIMIT as SYSTEM_PROMPT_ARGV_LIMIT
from ._options import ClaudeOptions as ClaudeOptions
from ._options import PermissionMode as PermissionMode
from ._translate import ClaudeTranslator as ClaudeTranslator

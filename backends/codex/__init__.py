"""The codex backend: options, exec / exec resume argv, JSONL translation."""

from ._backend import CodexBackend as CodexBackend
from ._options import CodexOptions as CodexOptions
from ._translate import CodexTranslator as CodexTranslator

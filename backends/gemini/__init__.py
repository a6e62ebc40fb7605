"""The gemini backend: options, headless stream-json argv and settings, translation."""

from ._backend import GeminiBackend as GeminiBackend
from ._options import GeminiOptions as GeminiOptions
from ._translate import GeminiTranslator as GeminiTranslator

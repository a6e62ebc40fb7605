"""The opencode backend: options, ``opencode run --format json`` argv and config, translation."""

from ._backend import OpencodeBackend as OpencodeBackend
from ._options import OpencodeOptions as OpencodeOptions
from ._translate import OpencodeTranslator as OpencodeTranslator

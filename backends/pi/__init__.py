"""The pi backend: options, ``pi --mode json`` argv and models file, translation."""

from ._backend import PiBackend as PiBackend
from ._options import PiOptions as PiOptions
from ._translate import PiTranslator as PiTranslator

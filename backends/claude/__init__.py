"""The Claude Code backend: options, argv, stream-json translation, failure markers."""

from ._translate import ClaudeTranslator as ClaudeTranslator

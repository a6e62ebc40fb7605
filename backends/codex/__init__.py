"""The codex backend: options, exec / exec resume argv, JSONL translation, and the live
app-server protocol of warm sessions."""

from ._backend import APP_TOOLS_TOKEN_VAR as APP_TOOLS_TOKEN_VAR
from ._backend import CodexBackend as CodexBackend
from ._live import CodexLive as CodexLive
from ._live_translate import CodexLiveTranslator as CodexLiveTranslator
from ._options import CodexOptions as CodexOptions
from ._translate import CodexTranslator as CodexTranslator

"""agentrt from plain threads, scripts and notebooks: ``with agentrt.sync.open_runtime(...)
as rt:``, then ``rt.ask(...)`` and the rest of `agentrt.Runtime`'s methods, each blocking
its thread until it settles, from any number of threads.

The runtime runs in a trio thread of its own, and nothing here uses asyncio, so a Jupyter
cell (whose thread runs an asyncio loop) may call it. See docs/asyncio.md.
"""

from ._faces._sync_runtime import EventStream as EventStream
from ._faces._sync_runtime import Runtime as Runtime
from ._faces._sync_runtime import Supervisor as Supervisor
from ._faces._sync_runtime import UnsolicitedTurns as UnsolicitedTurns
from ._faces._sync_runtime import open_runtime as open_runtime
from ._util import fixup_module_metadata as _fixup_module_metadata

__all__ = ["EventStream", "Runtime", "Supervisor", "UnsolicitedTurns", "open_runtime"]

_fixup_module_metadata(__name__, {name: globals()[name] for name in __all__})

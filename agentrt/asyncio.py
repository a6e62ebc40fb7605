"""agentrt from asyncio: ``async with agentrt.asyncio.open_runtime(...) as rt:``, then
``await rt.ask(...)`` and the rest of `agentrt.Runtime`'s methods, awaited from asyncio.

The runtime runs in a trio thread of its own; cancelling an asyncio task that awaits a call
cancels it as trio cancellation does, and exceptions come out as themselves. See
docs/asyncio.md.
"""

from ._faces._asyncio_runtime import EventStream as EventStream
from ._faces._asyncio_runtime import Runtime as Runtime
from ._faces._asyncio_runtime import Supervisor as Supervisor
from ._faces._asyncio_runtime import UnsolicitedTurns as UnsolicitedTurns
from ._faces._asyncio_runtime import open_runtime as open_runtime
from ._util import fixup_module_metadata as _fixup_module_metadata

__all__ = ["EventStream", "Runtime", "Supervisor", "UnsolicitedTurns", "open_runtime"]

_fixup_module_metadata(__name__, {name: globals()[name] for name in __all__})

"""The process driver, for backend authors and tests: not for application code.

Application code starts agents and talks to them through ``agentrt``; the runtime runs
every turn's CLI with `open_cli_process`. These names are for testing a backend's
`~agentrt.backend.Command` against its real CLI, or driving one turn's process by hand.
"""

from ._driver._process import BadLine as BadLine
from ._driver._process import CliProcess as CliProcess
from ._driver._process import FrameBatch as FrameBatch
from ._driver._process import ProcessLimits as ProcessLimits
from ._driver._process import ProcessTracker as ProcessTracker
from ._driver._process import open_cli_process as open_cli_process
from ._driver._proctree import MARKER_ENV as _MARKER_ENV
from ._errors import ProcessFailure as ProcessFailure
from ._util import fixup_module_metadata as _fixup_module_metadata

# The variable every process of a turn is started with (inherited by what it starts; its
# value names the runtime and the turn): how the runtime finds a turn's processes, and how
# a test can.
TURN_MARKER_ENV = _MARKER_ENV

_fixup_module_metadata(__name__, globals())

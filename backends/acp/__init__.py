"""The acp backend: any agent that speaks the Agent Client Protocol (JSON-RPC over its stdin
and stdout), its command an option; the wire format is the ``agent-client-protocol``
package's."""

from ._backend import AcpBackend as AcpBackend
from ._live import AcpLive as AcpLive
from ._options import AcpOptions as AcpOptions
from ._options import session_cwd as session_cwd
from ._translate import AcpTranslator as AcpTranslator

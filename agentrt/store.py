"""For store authors: what a session store implements, the records it keeps, and the
helpers that make its fencing and errors agree with agentrt's own stores.

A store is one class implementing `SessionStore` (the core) and whichever capability
protocols it can honour; the runtime asks for each with ``isinstance`` (they are
runtime-checkable), never by class, once, as it opens the store (`StoreCapabilities`,
``Runtime.store_capabilities``), and refuses what needs a capability the store lacks,
naming it:

- `LiveProcessStore`: agents that run CLI processes (the reaper finds their turns);
- `LeaseStore`: ``open_runtime(node=..., lease_ttl=..., host_agents=True)``; without it
  the runtime's names are a table of its own;
- `SpecStore`: ``failover=True`` and ``host_agents=True``;
- `BudgetStore`: the budgets that apply to each agent (`StoredBudget`), which
  ``agentrt status`` shows; without it they hold in the runtime only;
- `TranscriptStore`: ``portable=True``;
- `WorkspaceStore`: ``start_agent(workspace=...)`` (the git worktree an agent's record owns);
- `RoutingStore`: calls to agents other runtimes own; without it a name this runtime does
  not run is `~agentrt.AgentNotFound`;
- `ApprovalStore`: tool calls an agent hands to a person (`~agentrt.AskOperator`), which
  a console of any runtime on the store answers;
- `TurnHistoryStore`: each agent's finished turns (`StoredTurn`), the newest kept, which
  the console shows; without it turns are counted in the session row only.
- `RequestStore`: each agent's requests, durable (`StoredRequest`, `RequestOutcome`):
  queued before the call returns, started at most once under the owner's lease epoch,
  their outcome readable by id or key from any program; `MemoryStore` lacks it and keeps
  each mailbox in memory.
- `CredentialStore`: what holds each credential's agents (`StoredCredential`: a usage
  limit's park, an expired login's halt), so a restarted program or another one on the
  store holds them too, and ``agentrt status`` shows why; without it they live in the
  memory of the program that saw them.
- `ScheduleStore`: each agent's scheduled prompts (`~agentrt.Schedule`, ``Runtime.schedule``),
  which whichever program owns the agent fires, each due time once.

`agentrt.testing.store_conformance` gives the checks a store passes, each skipped where the
store lacks what it checks.
"""

from . import __all__ as _AGENTRT_NAMES
from ._records import Lease as Lease
from ._records import LeaseOwner as LeaseOwner
from ._records import OperatorDecision as OperatorDecision
from ._records import PendingApproval as PendingApproval
from ._records import RequestOutcome as RequestOutcome
from ._records import SessionRecord as SessionRecord
from ._records import SessionRow as SessionRow
from ._records import StoredBudget as StoredBudget
from ._records import StoredCredential as StoredCredential
from ._records import StoredRequest as StoredRequest
from ._records import StoredTranscript as StoredTranscript
from ._records import StoredTurn as StoredTurn
from ._records import StoredWorkspace as StoredWorkspace
from ._stores._protocols import ApprovalStore as ApprovalStore
from ._stores._protocols import BudgetStore as BudgetStore
from ._stores._protocols import CredentialStore as CredentialStore
from ._stores._protocols import LeaseStore as LeaseStore
from ._stores._protocols import LiveProcessStore as LiveProcessStore
from ._stores._protocols import Router as Router
from ._stores._protocols import RoutingStore as RoutingStore
from ._stores._protocols import Serve as Serve
from ._stores._protocols import SessionStore as SessionStore
from ._stores._protocols import SpecStore as SpecStore
from ._stores._protocols import StoreCapabilities as StoreCapabilities
from ._stores._protocols import TranscriptStore as TranscriptStore
from ._stores._protocols import TurnHistoryStore as TurnHistoryStore
from ._stores._protocols import WorkspaceStore as WorkspaceStore
from ._stores._protocols import check_fence as check_fence
from ._stores._protocols import granted_epoch as granted_epoch
from ._stores._protocols import no_row as no_row
from ._stores._protocols import stored_reason as stored_reason
from ._stores._request_store import RequestStore as RequestStore
from ._stores._schedule_store import ScheduleStore as ScheduleStore
from ._stores._transcripts import check_transcript_path as check_transcript_path
from ._stores._transcripts import stale_chunk as stale_chunk
from ._util import fixup_module_metadata as _fixup_module_metadata

__all__ = [
    "ApprovalStore",
    "BudgetStore",
    "CredentialStore",
    "Lease",
    "LeaseOwner",
    "LeaseStore",
    "LiveProcessStore",
    "OperatorDecision",
    "PendingApproval",
    "RequestOutcome",
    "RequestStore",
    "Router",
    "RoutingStore",
    "ScheduleStore",
    "Serve",
    "SessionRecord",
    "SessionRow",
    "SessionStore",
    "SpecStore",
    "StoreCapabilities",
    "StoredBudget",
    "StoredCredential",
    "StoredRequest",
    "StoredTranscript",
    "StoredTurn",
    "StoredWorkspace",
    "TranscriptStore",
    "TurnHistoryStore",
    "WorkspaceStore",
    "check_fence",
    "check_transcript_path",
    "granted_epoch",
    "no_row",
    "stale_chunk",
    "stored_reason",
]

# agentrt's own names passed on here (its records and protocol) keep the names they have in
# agentrt whichever of the two modules a program imports first.
_fixup_module_metadata(
    __name__, {name: value for name, value in globals().items() if name not in _AGENTRT_NAMES}
)

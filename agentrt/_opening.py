"""What ``open_runtime`` checks before it opens anything, and the loop it runs for
``host_agents=True``; the runtime itself is `agentrt._runtime`."""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs

from ._agent import Agent
from ._budgets import Budget
from ._cluster._ownership import (
    DEFAULT_LEASE_TTL,
    check_kill_grace,
    lease_ttl_option,
    node_option,
)
from ._errors import InvalidOptions
from ._failover import Host
from ._options import (
    DEFAULT_OPTIONS,
    AgentOptions,
    budget_tokens_option,
    budget_usd_option,
    intensity_option,
    kill_grace_option,
    split_options,
    strategy_option,
)
from ._restart import RestartIntensity, Strategy
from ._stores._protocols import LeaseStore, SessionStore, SpecStore, StoreCapabilities, lacks
from ._supervisor import Context


@attrs.frozen
class RuntimeOptions:
    """``open_runtime``'s options, checked."""

    max_processes: int | None
    strategy: Strategy
    intensity: RestartIntensity
    node: str
    ttl: float
    # The options of an agent that gives none (``kill_grace`` among them).
    agent_defaults: AgentOptions
    host_agents: bool
    budget: Budget
    # The ownership options as given, for the store to refuse those it cannot honour.
    ownership_given: Mapping[str, object]


def runtime_options(
    *,
    max_processes: int | None,
    strategy: str,
    max_restarts: int,
    period: float,
    backoff: float,
    max_backoff: float,
    node: str | None,
    lease_ttl: float | None,
    kill_grace: float,
    host_agents: bool,
    budget_usd: float | None,
    budget_tokens: int | None,
    on_usage_limit: str,
    on_credential_expired: str,
) -> RuntimeOptions:
    """``open_runtime``'s options checked, in the order that decides which error a bad
    one gets; `InvalidOptions` naming the first bad one."""
    if max_processes is not None and (
        isinstance(max_processes, bool) or not isinstance(max_processes, int) or max_processes < 1
    ):
        raise InvalidOptions("max_processes", max_processes, "must be an int >= 1, or None")
    chosen = strategy_option(strategy)
    intensity = intensity_option(max_restarts, period, backoff, max_backoff)
    given = {"node": node, "lease_ttl": lease_ttl, "host_agents": host_agents}
    node = socket.gethostname() if node is None else node_option(node)
    ttl = DEFAULT_LEASE_TTL if lease_ttl is None else lease_ttl_option(lease_ttl)
    grace = kill_grace_option(kill_grace)
    check_kill_grace(grace, ttl, key="lease_ttl")
    # The agents' defaults, checked as an agent's own options are.
    defaults, _ = split_options(
        {"on_usage_limit": on_usage_limit, "on_credential_expired": on_credential_expired},
        attrs.evolve(DEFAULT_OPTIONS, kill_grace=grace),
    )
    if not isinstance(host_agents, bool):
        raise InvalidOptions("host_agents", host_agents, "must be True or False")
    budget = Budget(
        "runtime",
        budget_usd_option("budget_usd", budget_usd),
        budget_tokens_option("budget_tokens", budget_tokens),
    )
    return RuntimeOptions(
        max_processes, chosen, intensity, node, ttl, defaults, host_agents, budget, given
    )


def check_ownership(
    store: SessionStore, capabilities: StoreCapabilities, given: Mapping[str, object]
) -> None:
    """Refuse the ownership options a store without leases (or specs) cannot honour."""
    for key, value in given.items():
        if value is None or value is False:
            continue
        if capabilities.leases is None:
            raise InvalidOptions(key, value, lacks(store, LeaseStore, key))
        if key == "host_agents" and capabilities.specs is None:
            raise InvalidOptions(key, value, lacks(store, SpecStore, key))


def stop_lost(context: Context, name: str, reason: str) -> None:
    """Stop the agent whose lease was lost: its CLI processes SIGKILLed at once, before the
    fence tells the guard it may stop killing (see `ProcessTracker.kill_agent`); not a
    crash, so it is not restarted."""
    context.tracker.kill_agent(name)
    child = context.children.get(name)
    if child is not None:
        child.supervisor._discard(child, reason)


def host_for(
    start_agent: Callable[..., Awaitable[object]], context: Context, max_processes: int | None
) -> Host:
    """The loop of a runtime opened with ``host_agents=True``; it starts the agents it takes
    over with ``start_agent`` (`Runtime.start_agent`)."""

    async def start(agent: type[Agent], name: str, backend: str, options: dict[str, Any]) -> None:
        await start_agent(agent, name=name, backend=backend, **options)

    specs, leases = context.capabilities.specs, context.capabilities.leases
    assert specs is not None and leases is not None  # open_runtime refused host_agents
    return Host(
        specs,
        leases,
        ttl=context.ownership.ttl,
        capacity=max_processes,
        running=lambda: {*context.children, *context.starting},
        dead_holder=context.ownership.holder_gone,
        start=start,
    )

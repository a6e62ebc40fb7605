"""Failover: an agent's supervisor spec in the store, and the runtime that hosts agents
(``open_runtime(host_agents=True)``), which takes over the agents no live runtime owns.

The spec is what a runtime of another program needs to start the agent again: the agent
class as an importable reference (``module:qualname``), its backend's name and its
``start_agent`` options, as JSON. `start_agent` writes it (fenced by the name's lease) and
`stop_agent` removes it before the lease is given back, as does an agent that ends for good
while its runtime stays open; a runtime that dies, or closes, leaves it, so the name's
lease lapses with the spec still there. A host polls the specs, in start order, and
starts each one whose lease is not held (released, expired, or held by a dead runtime of
its own node) while it runs fewer agents than its ``max_processes``; ``resume="auto"``
continues the stored session.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import trio

from ._agent import Agent
from ._errors import AgentAlreadyStarted, InvalidOptions, NoRuntime, StoreError
from ._records import Lease
from ._redact import redact
from ._stores._protocols import LeaseStore, SpecStore
from ._worktrees import GitWorktree

logger = logging.getLogger("agentrt")

# A host looks for agents to take over this often (at most), so a lapsed lease is seen
# within a second of expiring.
MAX_POLL_INTERVAL = 1.0

StartAgent = Callable[[type[Agent], str, str, dict[str, Any]], Awaitable[object]]


def _agent_reference(agent: object) -> str:
    """``module:qualname`` of an Agent subclass another program can import, or
    `ValueError` saying why ``agent`` has none."""
    if not isinstance(agent, type):
        kind = "an Agent instance" if isinstance(agent, Agent) else "a factory"
        raise ValueError(f"{kind} cannot be stored; pass the Agent subclass itself")
    reference = f"{agent.__module__}:{agent.__qualname__}"
    if agent.__module__ == "__main__" or "<locals>" in agent.__qualname__:
        raise ValueError(
            f"{reference} cannot be imported by another program; define the class at the "
            "top level of an importable module"
        )
    try:
        found = _import_agent(reference)
    except ValueError:
        found = None
    if found is not agent:
        raise ValueError(f"{reference} does not import as this class")
    return reference


def _import_agent(reference: str) -> type[Agent]:
    """The Agent subclass ``module:qualname`` names; `ValueError` if it is none."""
    module_name, _, qualname = reference.partition(":")
    try:
        found: object = importlib.import_module(module_name)
        for part in qualname.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{reference} does not import: {exc}") from exc
    if not (isinstance(found, type) and issubclass(found, Agent)):
        raise ValueError(f"{reference} is not an agentrt.Agent subclass")
    return found


def encode_spec(agent: object, backend: object, options: Mapping[str, Any]) -> str:
    """The stored spec of a `start_agent` call, or `ValueError` saying what cannot be
    stored (an instance or factory, a backend object, options that are not JSON or may
    hold secrets: ``env``, or what `redact` would hide)."""
    if not isinstance(backend, str):
        raise ValueError("a backend object cannot be stored; pass the backend's name")
    reference = _agent_reference(agent)
    stored = dict(options)
    if isinstance(workspace := stored.get("workspace"), GitWorktree):
        stored["workspace"] = workspace.to_json()
    try:
        encoded = json.dumps(
            {"agent": reference, "backend": backend, "options": stored},
            allow_nan=False,
            sort_keys=True,
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"its options are not JSON ({exc})") from exc
    # Secrets never reach the store: a host gives its CLIs its own environment.
    if "env" in options:
        raise ValueError(
            "its env option may hold secrets, which are not stored; give the hosts those "
            "variables in their own environment"
        )
    if redact(encoded) != encoded:
        raise ValueError("its options hold what looks like a secret, which is not stored")
    return encoded


def decode_spec(spec: str) -> tuple[type[Agent], str, dict[str, Any]]:
    """The agent class, backend name and options of a stored spec; `ValueError` if they
    cannot be had here (the class does not import, the spec is not one)."""
    try:
        fields = json.loads(spec)
        reference, backend, options = fields["agent"], fields["backend"], fields["options"]
    except (ValueError, TypeError, KeyError) as exc:
        raise ValueError(f"the stored spec is not one agentrt wrote ({exc})") from exc
    if not (isinstance(reference, str) and isinstance(backend, str) and isinstance(options, dict)):
        raise ValueError("the stored spec is not one agentrt wrote")
    if options.get("workspace") is not None:
        options["workspace"] = GitWorktree.from_json(options["workspace"])
    return _import_agent(reference), backend, options


def stored_spec(
    name: str, agent: object, backend: object, options: Mapping[str, Any], failover: bool | None
) -> str | None:
    """What `start_agent` stores for ``name``: its spec, or None (``failover=False``, or
    a spec that cannot be stored while ``failover`` is None); `InvalidOptions` for one that
    cannot be stored with ``failover=True``."""
    if failover is False:
        return None
    try:
        return encode_spec(agent, backend, options)
    except ValueError as exc:
        if failover:
            raise InvalidOptions("failover", True, f"agent {name!r}: {exc}") from None
        logger.debug("agent %r: not stored for failover: %s", name, exc)
        return None


class Host:
    """The loop of a runtime that hosts agents: it starts, with ``start``, the stored
    agents whose lease is free while ``running()`` (its agents) is below ``capacity``.

    ``dead_holder(lease)`` says whether a held lease belongs to a runtime of this node
    that has ended (then it may be taken at once, as `start_agent` does)."""

    def __init__(
        self,
        specs: SpecStore,
        leases: LeaseStore,
        *,
        ttl: float,
        capacity: int | None,
        running: Callable[[], set[str]],
        dead_holder: Callable[[Lease], bool],
        start: StartAgent,
    ) -> None:
        self._specs = specs
        self._leases = leases
        self._interval = min(MAX_POLL_INTERVAL, ttl / 5)
        self._capacity = math.inf if capacity is None else capacity
        self._running = running
        self._dead_holder = dead_holder
        self._start = start
        # Specs that could not be started, so each failure is logged once.
        self._failed: dict[str, str] = {}

    async def run(self) -> None:
        """Take over agents every poll interval, until cancelled or the runtime closes."""
        try:
            while True:
                await self.take_over()
                await trio.sleep(self._interval)
        except NoRuntime:
            return

    async def take_over(self) -> list[str]:
        """One pass: start the free agents there is room for, in start order; their names."""
        try:
            specs = await self._specs.specs()
            if not specs:
                return []
            leases = {lease.name: lease for lease in await self._leases.leases()}
        except StoreError as exc:
            logger.warning("hosting agents: the store could not be read: %s", exc)
            return []
        taken: list[str] = []
        for name, spec in specs:
            running = self._running()
            if len(running) >= self._capacity:
                break
            lease = leases.get(name)
            if name in running or (lease and lease.held and not self._dead_holder(lease)):
                continue
            if await self._take(name, spec):
                taken.append(name)
        return taken

    async def _take(self, name: str, spec: str) -> bool:
        try:
            agent, backend, options = decode_spec(spec)
            await self._start(agent, name, backend, options)
        except AgentAlreadyStarted:
            return False  # another runtime was quicker
        except NoRuntime:
            raise
        except Exception as exc:
            if self._failed.get(name) != spec:
                self._failed[name] = spec
                logger.warning("hosting agents: agent %r could not be taken over: %s", name, exc)
            return False
        self._failed.pop(name, None)
        logger.info("hosting agents: took over agent %r", name)
        return True

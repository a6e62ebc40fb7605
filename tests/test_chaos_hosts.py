"""The cross-host chaos run (chaos_hosts.py) at a size that fits the suite: 2 runtimes, 20
agents, 60 s of faults on a real PostgreSQL server; and its keyed run (durable requests,
issue 38): 4 runtimes, 12 agents, 30 s, two calling programs. Each seed is printed (pytest
shows it when the test fails); `python tests/chaos_hosts.py --seed N [--keyed]` runs the
same schedule again. ``AGENTRT_CHAOS_KEYED_SECONDS`` and ``AGENTRT_CHAOS_KEYED_AGENTS`` make
the keyed run bigger (the issue's: 1800 and 100)."""

from __future__ import annotations

import os
import random

import chaos_hosts
import pytest

pytestmark = [pytest.mark.xdist_group("chaos_hosts"), pytest.mark.long]


async def test_chaos_across_hosts_loses_nothing() -> None:
    seed = random.randrange(1 << 30)
    print(f"chaos seed {seed}")
    report = await chaos_hosts.run(seconds=60, runtimes=2, agents=20, seed=seed)
    print(report.summary())
    assert report.answered > 0 and sum(report.faults.values()) > 0, report.summary()
    assert not report.hung, report.summary()
    assert not report.repeated, report.summary()
    assert report.most_clis <= 1, report.summary()
    assert not report.lost, report.summary()
    assert not report.broken, report.summary()
    assert not report.sessions_changed, report.summary()
    assert not report.unanswered_after, report.summary()


async def test_keyed_requests_under_chaos_end_once_and_none_is_stranded() -> None:
    """Durable requests across 4 runtime programs: every keyed request ends with one
    outcome, the same for the two programs that asked it, no prompt reaches a CLI twice,
    no answer is for a prompt no CLI saw, no answered turn is lost, and once the faults
    stop every agent answers and the store holds no request queued or running."""
    seed = random.randrange(1 << 30)
    print(f"chaos seed {seed}")
    seconds = float(os.environ.get("AGENTRT_CHAOS_KEYED_SECONDS", "30"))
    agents = int(os.environ.get("AGENTRT_CHAOS_KEYED_AGENTS", "12"))
    report = await chaos_hosts.run(
        seconds=seconds, runtimes=4, agents=agents, seed=seed, keyed=True
    )
    print(report.summary())
    assert report.outcomes["complete"] > 0 and sum(report.faults.values()) > 0, report.summary()
    assert report.second_caller > 0, report.summary()
    assert not report.hung, report.summary()
    assert not report.repeated, report.summary()
    assert not report.disagreed, report.summary()
    assert not report.unseen, report.summary()
    assert report.most_clis <= 1, report.summary()
    assert not report.lost, report.summary()
    assert not report.broken, report.summary()
    assert not report.sessions_changed, report.summary()
    assert not report.unanswered_after, report.summary()
    assert not report.stranded, report.summary()

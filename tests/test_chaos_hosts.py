"""The cross-host chaos run (chaos_hosts.py) at a size that fits the suite: 2 runtimes, 20
agents, 60 s of faults on a real PostgreSQL server. Its seed is printed (pytest shows it
when the test fails); `python tests/chaos_hosts.py --seed N` runs the same schedule again."""

from __future__ import annotations

import random

import chaos_hosts
import pytest

pytestmark = pytest.mark.xdist_group("chaos_hosts")


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

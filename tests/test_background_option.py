"""``background``: checked as an option, and refused where no warm CLI keeps it."""

from __future__ import annotations

from typing import Any

import pytest

from agentrt import Agent, InvalidOptions, MemoryStore, open_runtime
from agentrt.testing import ScriptedBackend


@pytest.mark.parametrize("value", [True, 30])
async def test_background_needs_a_warm_agent(value: Any) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions, match="only on a warm agent: set keep_alive") as info:
            await rt.start_agent(Agent, name="a", backend=ScriptedBackend([]), background=value)
    assert info.value.key == "background" and info.value.value == value


@pytest.mark.parametrize("value", [0, -1, "soon", float("nan"), None])
async def test_background_refuses_what_is_not_a_bound(value: Any) -> None:
    async with open_runtime(store=MemoryStore()) as rt:
        with pytest.raises(InvalidOptions, match="must be False") as info:
            await rt.start_agent(
                Agent, name="a", backend=ScriptedBackend([]), keep_alive=5, background=value
            )
    assert info.value.key == "background"

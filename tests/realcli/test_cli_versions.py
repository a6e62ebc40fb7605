"""The pinned real CLIs' own versions on their turns, and ``cli_versions`` refusing a turn
whose real CLI reports another one (claude says it in its init; codex is asked)."""

from __future__ import annotations

import pytest
import trio

from agentrt import Agent, CliVersionMismatch, MemoryStore, open_runtime
from agentrt.testing import AnthropicHang, AnthropicText, OpenAIReply, open_fake_openai

from ._claude import Claude, Lines
from ._codex import codex_binary, codex_place

pytestmark = pytest.mark.realcli
BOUND = 60


async def test_claude_reports_its_version_on_the_response_and_the_status(claude: Claude) -> None:
    claude.api.add_replies(AnthropicText("hello"))
    async with open_runtime(store=MemoryStore()) as rt:
        await rt.start_agent(
            Agent, name="coder", backend="claude", **claude.agent_options(cli_versions=">=2.1,<3")
        )
        with trio.fail_after(BOUND):
            response = await rt.ask("coder", "hi")
        assert (await rt.status("coder")).cli_version == claude.version
    assert response.cli_version == claude.version


async def test_claude_outside_the_declared_versions_is_refused_at_its_init(claude: Claude) -> None:
    # The model would never answer: a refusal that waited for it would take the CLI's
    # request timeout (10 s here); the init comes first, and the turn ends there. Timed
    # from the init, not the ask: a start of node on a loaded machine takes seconds.
    claude.api.add_replies(AnthropicHang())
    agent = Lines()
    async with open_runtime(store=MemoryStore()) as rt:
        options = claude.agent_options(cli_versions=">=3", kill_grace=0.5)
        await rt.start_agent(agent, name="coder", backend="claude", **options)
        with trio.fail_after(BOUND), pytest.raises(CliVersionMismatch) as refused:
            await rt.ask("coder", "hi")
        ended = trio.current_time()
        record = await rt.store.load("coder")
    assert (refused.value.expected, refused.value.reported) == (">=3", claude.version)
    assert refused.value.session_id is not None
    assert record is not None and record.last_stop_reason == "cli_version_mismatch"
    assert ended - agent.first_event < 10, (agent.first_event, ended)


@pytest.mark.skipif(codex_binary() is None, reason="codex is not installed: run `make codex-cli`")
async def test_codex_is_asked_its_version_which_is_on_every_response() -> None:
    binary = codex_binary()
    assert binary is not None
    script = [OpenAIReply.text("one"), OpenAIReply.text("two")]
    async with (
        open_fake_openai(script) as api,
        codex_place(api) as place,
        open_runtime(store=MemoryStore()) as rt,
    ):
        raw = place.raw_options(binary, cli_versions=">=0.171,<0.172")
        await rt.start_agent(Agent, name="coder", backend="codex", **raw)
        with trio.fail_after(BOUND):
            first = await rt.ask("coder", "a")
            second = await rt.ask("coder", "b")
        assert (await rt.status("coder")).cli_version == "0.171.0"
    assert first.cli_version == second.cli_version == "0.171.0"

"""Portable agents' CLI homes share the user's login through links (issue 39, part 2): a
login refreshed in one agent's home is the one every agent reads. The pinned claude
(2.1.332) writes its refreshed login by write-then-rename (a new file renamed over
``.credentials.json``, link or not: its atomic-write helper opens with ``O_NOFOLLOW`` and
renames over the path), and its token endpoint cannot be pointed at a loopback fake
(``CLAUDE_CODE_CUSTOM_OAUTH_URL`` must be one of three approved https origins, and the
production ``TOKEN_URL`` is fixed), so here a process of the agent's turn replaces the link
as the CLI's refresh would, with the real CLI and the real process path around it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import trio

from agentrt import Agent, SQLiteStore, open_runtime
from agentrt.testing import AnthropicText, AnthropicToolUse

from ._claude import Claude

pytestmark = pytest.mark.realcli

TURN_BOUND = 60

# What the CLI's refresh does: the new login into a file beside the old, renamed over it.
REFRESH = (
    "import json, os; home = os.environ['CLAUDE_CONFIG_DIR']; "
    "new = os.path.join(home, '.credentials.json.tmp'); "
    "open(new, 'w').write(json.dumps({'claudeAiOauth': {'accessToken': 'rotated'}})); "
    "os.replace(new, os.path.join(home, '.credentials.json'))"
)


def login(token: str) -> str:
    return json.dumps({"claudeAiOauth": {"accessToken": token}})


async def test_a_login_one_agent_refreshed_is_the_one_every_agent_reads(
    claude: Claude, tmp_path: Path
) -> None:
    user = tmp_path / "user"
    (user / ".claude").mkdir(parents=True)
    (user / "tmp").mkdir()
    users_login = user / ".claude" / ".credentials.json"
    users_login.write_text(login("old"))
    os.utime(users_login, (1_700_000_000, 1_700_000_000))  # before any refresh
    command = f'{sys.executable} -c "{REFRESH}"'
    claude.api.set_script(
        [
            AnthropicToolUse("Bash", {"command": command, "description": "refresh"}),
            AnthropicText("Refreshed."),
            AnthropicText("Still logged in."),
        ]
    )
    options = claude.agent_options(
        env={"HOME": str(user), "TMPDIR": str(user / "tmp")},
        portable=True,
        cli_homes=str(tmp_path / "cli-homes"),
        allowed_tools=["Bash"],
    )
    async with open_runtime(store=SQLiteStore(tmp_path / "s.sqlite3")) as rt:
        await rt.start_agent(Agent, name="a", backend="claude", **options)
        await rt.start_agent(Agent, name="b", backend="claude", **options)
        with trio.fail_after(TURN_BOUND):
            assert (await rt.ask("a", "refresh your login")).text == "Refreshed."
        # a's CLI replaced its link; after the turn the user's login is the refreshed one,
        # and both homes link to it again.
        assert json.loads(users_login.read_text())["claudeAiOauth"]["accessToken"] == "rotated"
        entries = sorted((tmp_path / "cli-homes").glob("*/.credentials.json"))
        assert len(entries) == 2
        for entry in entries:
            assert entry.is_symlink() and entry.resolve() == users_login.resolve()
        with trio.fail_after(TURN_BOUND):
            assert (await rt.ask("b", "go on")).text == "Still logged in."
        assert (await rt.status("a")).credential == (await rt.status("b")).credential

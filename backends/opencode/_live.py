"""opencode's warm mode: one ``opencode acp`` process, the Agent Client Protocol over its
stdin and stdout, driven by the ACP backend's protocol (`agentrt.backends.acp.AcpLive`).

``opencode acp`` takes no ``--model``, ``--agent`` or ``--title``: the model and the agent
go in the config file (``model``, ``default_agent``), and its "title" agent is disabled, so
that a new session makes no model call for a title, as ``--title`` ensures per turn. The
process serves opencode's HTTP API on a loopback port for its own ACP side; it gets a
password of its own (``OPENCODE_SERVER_PASSWORD``), so that nothing else on the machine
can drive the agent's sessions through that port. Checked against opencode 1.18.33.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from typing import Any

from agentrt.backend import Allow, Command, Deny, InvalidOptions, SecretFile

from ..acp import AcpLive, session_cwd
from ._command import CONFIG_VAR, opencode_env
from ._options import OpencodeOptions, session_id_error

PASSWORD_VAR = "OPENCODE_SERVER_PASSWORD"


def live(options: OpencodeOptions, *, session_id: str | None, approvals: bool = False) -> AcpLive:
    """The ``opencode acp`` process of one conversation (``session_id``: the one to load).

    Raises `agentrt.InvalidOptions` for a session id that is not opencode's."""
    if session_id is not None and (why := session_id_error(session_id)):
        raise InvalidOptions("session_id", session_id, why)
    return AcpLive(
        live_command(options, secrets.token_urlsafe(24)),
        session_id=session_id,
        session_cwd=session_cwd(options.cwd),
        approvals=approvals,
        # auto: a tool whose permission is "ask" runs unasked, as `run --auto` does.
        unasked=Allow() if options.auto else Deny("no approve_tool"),
    )


def live_command(options: OpencodeOptions, password: str) -> Command:
    """``opencode acp`` with the options' config, model and agent in its config file."""
    env = {PASSWORD_VAR: password, **opencode_env(options)}
    content = json.dumps(acp_config(options), separators=(",", ":")).encode()
    return Command(
        argv=(options.binary, "acp"),
        env=env,
        env_files={CONFIG_VAR: SecretFile("opencode.json", content)},
        cwd=options.cwd,
    )


def acp_config(options: OpencodeOptions) -> dict[str, Any]:
    """The ``config`` option with what ``opencode run`` takes as flags: the model, the
    agent, and no title call."""
    config = dict(options.config)
    agents = config.get("agent")
    config["agent"] = {**(agents if isinstance(agents, Mapping) else {}), "title": _NO_TITLE}
    if options.model is not None:
        config["model"] = options.model
    if options.agent is not None:
        config["default_agent"] = options.agent
    return config


# opencode's built-in "title" agent, removed: it would ask the model for a session title.
_NO_TITLE = {"disable": True}

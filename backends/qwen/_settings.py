"""The settings every Qwen Code turn starts with, and how they reach the CLI.

Qwen Code reads no settings from its command line; it merges settings files, lowest first:
the system defaults (``QWEN_CODE_SYSTEM_DEFAULTS_PATH``), the user's (``$QWEN_HOME/
settings.json``), the project's (``.qwen/settings.json``), the system's. The backend's own
settings go in as the system defaults, a file the driver writes for each process (a
`SecretFile`: settings may carry credentials), so the user's and the project's files
still win where they speak, and an operator's system file is not replaced.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from agentrt.backend import SecretFile

# Each one is off because it makes calls nobody asked for: usage statistics go to the
# vendor; after each turn the managed memory runs an extraction (and a "dream") agent that
# calls the model with tools, so a turn would cost more than its own model calls, and a
# scripted test API would see requests it did not script; updates are a fleet's to choose.
DEFAULT_SETTINGS: Mapping[str, Mapping[str, Any]] = {
    "privacy": {"usageStatisticsEnabled": False},
    "memory": {
        "enableManagedAutoMemory": False,
        "enableManagedAutoDream": False,
        "enableAutoSkill": False,
    },
    "general": {"enableAutoUpdate": False},
}

SETTINGS_PATH_VAR = "QWEN_CODE_SYSTEM_DEFAULTS_PATH"


def settings_file(overrides: Mapping[str, Mapping[str, Any]]) -> SecretFile:
    """The system-defaults file: `DEFAULT_SETTINGS` with ``overrides`` merged in, one
    section at a time (a key the options name replaces the default's)."""
    merged: dict[str, Any] = {name: dict(body) for name, body in DEFAULT_SETTINGS.items()}
    for name, body in overrides.items():
        merged[name] = {**merged.get(name, {}), **body}
    return SecretFile("system-defaults.json", json.dumps(merged, separators=(",", ":")).encode())

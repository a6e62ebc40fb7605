"""The pinned ``claude`` that ``make claude-cli`` (and so ``make demo``) installs under this
checkout's ``.cache/``: found the same way by the demo, the fake-API runner and the doctor."""

from __future__ import annotations

import os
from pathlib import Path

import attrs

from ._backends import resolve_backend

_CHECKOUT = Path(__file__).resolve().parents[1]


@attrs.frozen
class PinnedClaude:
    path: Path
    version: str

    @property
    def shown(self) -> str:
        """The path, relative to the checkout when it is inside it."""
        inside = self.path.is_relative_to(_CHECKOUT)
        return str(self.path.relative_to(_CHECKOUT) if inside else self.path)

    def __str__(self) -> str:
        return f"claude {self.version} (pinned, {self.shown})"


def pinned_claude() -> PinnedClaude | None:
    """The claude binary ``make claude-cli`` installs in this checkout, if it is there."""
    written_for: str = getattr(resolve_backend("claude"), "written_for_version", "")
    version = os.environ.get("AGENTRT_CLAUDE_VERSION") or written_for
    path = _CHECKOUT / ".cache" / f"claude-{version}" / "node_modules" / ".bin" / "claude"
    return PinnedClaude(path, version) if path.exists() else None

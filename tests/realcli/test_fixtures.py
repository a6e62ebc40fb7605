"""The recorded stream-json fixtures stay consistent with their manifest (no CLI needed)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from agentrt.backend import redact

from ._claude import FIXTURES

# A path of the recording machine (the test's temp dirs) that normalization missed.
_MACHINE_PATH = re.compile(r"(?<![A-Za-z0-9_])/tmp/|pytest-of-")


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    return []


@pytest.mark.parametrize(
    "manifest_path", sorted(FIXTURES.glob("*/MANIFEST.json")), ids=lambda p: p.parent.name
)
def test_fixtures_match_their_manifest(manifest_path: Path) -> None:
    folder = manifest_path.parent
    manifest = json.loads(manifest_path.read_text())
    assert manifest["claude_version"] == folder.name
    listed = set(manifest["fixtures"])
    assert listed == {p.stem for p in folder.glob("*.jsonl")}
    for name, entry in manifest["fixtures"].items():
        frames = [json.loads(line) for line in (folder / f"{name}.jsonl").read_text().splitlines()]
        assert len(frames) == entry["frames"], name
        for text in _strings(frames):
            assert redact(text) == text, f"{name}: credential-shaped text in {text[:80]!r}"
            assert not _MACHINE_PATH.search(text), f"{name}: unnormalized path in {text[:80]!r}"

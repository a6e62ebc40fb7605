"""``tools/install-npm-cli`` installs a pinned CLI and checks its ``--version`` before the
folder is put in place, whichever stream the CLI prints it on (pi prints it on stderr).
npm here is a stand-in on PATH that "installs" a script printing a version."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
INSTALL = ROOT / "tools" / "install-npm-cli"

# The stand-in: `npm install --prefix DIR ... PACKAGE@VERSION` writes DIR/node_modules/.bin/$BIN,
# which prints $PRINTED on the stream $STREAM names.
FAKE_NPM = """#!/bin/sh
while [ "$1" != "--prefix" ]; do shift; done
bin="$2/node_modules/.bin"
mkdir -p "$bin"
printf '#!/bin/sh\\necho %s >&%s\\n' "$PRINTED" "$STREAM" > "$bin/$BIN"
chmod +x "$bin/$BIN"
"""


def install(tmp_path: Path, printed: str, stream: int) -> subprocess.CompletedProcess[str]:
    tools = tmp_path / "tools"
    tools.mkdir(exist_ok=True)
    (tools / "npm").write_text(FAKE_NPM)
    (tools / "npm").chmod(0o755)
    env = {
        **os.environ,
        "PATH": f"{tools}:{os.environ['PATH']}",
        "BIN": "tool",
        "PRINTED": printed,
        "STREAM": str(stream),
    }
    target = tmp_path / "tool-1.2.3"
    return subprocess.run(
        [str(INSTALL), "some-package", "1.2.3", str(target), "tool"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


@pytest.mark.parametrize("stream", [1, 2], ids=["stdout", "stderr"])
def test_the_version_is_read_from_either_stream(tmp_path: Path, stream: int) -> None:
    done = install(tmp_path, "1.2.3", stream)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "tool-1.2.3" / "node_modules" / ".bin" / "tool").exists()
    assert not (tmp_path / "tool-1.2.3.partial").exists()


def test_another_version_is_refused_and_nothing_is_put_in_place(tmp_path: Path) -> None:
    done = install(tmp_path, "9.9.9", 2)
    assert done.returncode == 1
    assert "expected 1.2.3" in done.stderr
    assert not (tmp_path / "tool-1.2.3").exists()

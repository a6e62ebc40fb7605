"""The files a command needs before it runs: `SecretFile` arguments (written 0600 into a
private 0700 directory, removed afterwards) and `ConfigFile` settings (written in place,
kept)."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from ..backend import Command, ConfigFile, SecretFile


@contextmanager
def materialized(command: Command) -> Iterator[tuple[tuple[str, ...], dict[str, str]]]:
    """``command.argv`` with each `SecretFile` replaced by the path of a file holding its
    content, and ``command.env`` with each of ``command.env_files`` set to its file's path.
    The files live in a directory only we can read, created here and removed on exit
    however the block ends; a command without secret files touches no disk."""
    if not command.files:
        yield tuple(a for a in command.argv if isinstance(a, str)), dict(command.env)
        return
    directory = tempfile.mkdtemp(prefix="agentrt-")  # mode 0700
    try:
        paths: dict[SecretFile, str] = {}
        used: set[str] = set()
        for secret in command.files:
            if secret in paths:
                continue
            base = name = os.path.basename(secret.name) or "secret"
            while name in used:
                name = f"{len(used)}-{base}"
            used.add(name)
            path = os.path.join(directory, name)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(secret.content)
            paths[secret] = path
        argv = tuple(a if isinstance(a, str) else paths[a] for a in command.argv)
        env = {**command.env, **{name: paths[f] for name, f in command.env_files.items()}}
        yield argv, env
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def write_config_files(files: tuple[ConfigFile, ...]) -> None:
    """Write each file where it belongs: its directories made (0700), the content written
    to a private file beside it and renamed over it, so a CLI starting meanwhile reads the
    old file or the new one, never half of one. Raises OSError naming the path."""
    for config in files:
        directory = os.path.dirname(config.path)
        os.makedirs(directory, mode=0o700, exist_ok=True)
        fd, partial = tempfile.mkstemp(dir=directory, prefix=".agentrt-")  # mode 0600
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(config.content)
            os.replace(partial, config.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(partial)
            raise

"""`SecretFile` arguments: written 0600 into a private 0700 directory, removed afterwards."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

from ..backend import Command, SecretFile


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

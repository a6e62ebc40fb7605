"""The CLI's own version: asking a CLI that does not report it in its frames
(``version_command``, once per executable), and holding it against the versions an agent
accepts (``cli_versions``)."""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
from typing import TYPE_CHECKING, Any

import attrs
import trio

from ._errors import InvalidOptions
from ._redact import redact
from .backend import Backend, Command

if TYPE_CHECKING:
    from packaging.specifiers import SpecifierSet

# A CLI that does not print its version within this long is taken to report none.
VERSION_BOUND = 20.0
_VERSION = re.compile(r"\d+\.\d+\.\d+(?:[-.+][0-9A-Za-z.]+)?")


def cli_versions_option(key: str, value: object) -> str | None:
    """``cli_versions``: PEP 440 specifiers such as ``">=2.1,<3"`` (kept as given, for the
    error that names them), or None (any version)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise InvalidOptions(key, value, 'must be version specifiers such as ">=2.1,<3", or None')
    try:
        _specifiers(value)
        return value
    except ValueError as exc:  # packaging's InvalidSpecifier
        why = f'not version specifiers such as ">=2.1,<3" ({exc})'
        raise InvalidOptions(key, value, why) from None


# packaging is imported by the first agent given cli_versions, not by every program that
# imports the runtime (bench/README.md, "Starting agentrt").
@functools.lru_cache(maxsize=64)
def _specifiers(text: str) -> SpecifierSet:
    from packaging.specifiers import SpecifierSet

    return SpecifierSet(text)


def accepts(accepted: str, reported: str | None) -> bool:
    """Whether ``reported`` is one of the ``accepted`` versions (an unknown or unparsable
    version is not: it cannot be shown to be one). A pre-release is accepted only where a
    specifier names one, as pip has it."""
    if reported is None:
        return False
    from packaging.version import Version

    try:
        version = Version(reported)
    except ValueError:  # packaging's InvalidVersion
        return False
    specifiers = _specifiers(accepted)
    return specifiers.contains(version, prereleases=bool(specifiers.prereleases))


@attrs.frozen
class VersionAnswer:
    """What ``version_command`` printed: the version found in it (None: none), and the
    answer itself, redacted, or why there is none."""

    version: str | None
    text: str


async def ask_version(command: Command) -> VersionAnswer:
    """Run a backend's ``version_command`` and find the version in what it prints."""
    argv = [str(a) for a in command.argv]
    # In a session of its own, so that a CLI that does not answer is ended with what it
    # started (trio's own cancellation would kill the CLI alone).
    with trio.move_on_after(VERSION_BOUND) as bounded:
        try:
            result = await trio.run_process(
                argv,
                env=dict(command.env),
                cwd=command.cwd,
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                stdin=b"",
                start_new_session=True,
                deliver_cancel=_kill_group,
            )
        except OSError as exc:
            return VersionAnswer(None, f"`{' '.join(argv)}` did not start: {exc}")
        # Whatever a CLI prints is redacted before it is shown.
        text = redact((result.stdout or result.stderr).decode(errors="replace").strip())
        if result.returncode != 0:
            return VersionAnswer(
                None, f"`{' '.join(argv)}` exited with {result.returncode}: {text[:200]}"
            )
        match = _VERSION.search(text)
        return VersionAnswer(match.group(0) if match else None, text)
    assert bounded.cancelled_caught
    return VersionAnswer(None, f"`{' '.join(argv)}` did not answer within {VERSION_BOUND:g} s")


async def _kill_group(process: trio.Process) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


# Per executable file, as it is now (path, inode, size, mtime): a CLI updated in place is
# a new file, and is asked again.
_probed: dict[tuple[str, int, int, int], str | None] = {}


def _identity(command: Command) -> tuple[str, int, int, int] | None:
    binary = str(command.argv[0])
    path = binary if os.sep in binary else shutil.which(binary, path=command.env.get("PATH"))
    if path is None:
        return None
    try:
        real = os.path.realpath(path)
        stat = os.stat(real)
    except OSError:
        return None
    return real, stat.st_ino, stat.st_size, stat.st_mtime_ns


async def probed_version(backend: Backend, backend_options: Any) -> str | None:
    """The version ``backend.version_command`` prints for these options, asked once per
    executable file (cached in this process); None when it prints none."""
    command = backend.version_command(backend_options)
    identity = _identity(command)
    if identity is not None and identity in _probed:
        return _probed[identity]
    version = (await ask_version(command)).version
    if identity is not None:
        _probed[identity] = version
    return version

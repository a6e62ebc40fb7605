"""Finding a backend by name: the ``agentrt.backends`` entry-point group.

agentrt never imports a backend module at top level; ``backend="claude"`` loads the entry
point the first time it is asked for, and the backend object is shared from then on
(backends are pure).

The backends this distribution ships are found by the entry points its pyproject.toml
declares for them, kept here too (a test checks the two agree): importing
``importlib.metadata`` and reading every installed distribution's metadata costs memory
and start-up time in each process (bench/README.md), for names known in advance. Any
other name is looked up in the group, and these names cannot be taken over by another
distribution.
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._errors import BackendNotFound, CliNotFound, InvalidOptions

if TYPE_CHECKING:
    from importlib.metadata import EntryPoints

    from .backend import Backend, BackendInfo

GROUP = "agentrt.backends"

# Name -> "module:attribute", as in pyproject.toml's [project.entry-points."agentrt.backends"].
SHIPPED = {
    "claude": "agentrt.backends.claude:ClaudeBackend",
    "codex": "agentrt.backends.codex:CodexBackend",
    "gemini": "agentrt.backends.gemini:GeminiBackend",
    "qwen": "agentrt.backends.qwen:QwenBackend",
    "acp": "agentrt.backends.acp:AcpBackend",
    "opencode": "agentrt.backends.opencode:OpencodeBackend",
    "pi": "agentrt.backends.pi:PiBackend",
}

_loaded: dict[str, Backend] = {}


def _load_shipped(module: str, attribute: str) -> Any:
    return getattr(importlib.import_module(module), attribute)


def _entry_points(group: str) -> EntryPoints:
    from importlib.metadata import entry_points

    return entry_points(group=group)


def backend_names() -> tuple[str, ...]:
    """Every backend installed: the shipped ones and every entry point of the group, sorted
    (for the command's listings; reading the group reads every distribution's metadata)."""
    return tuple(sorted({*SHIPPED, *_entry_points(GROUP).names}))


def backend_info(backend: Backend) -> BackendInfo:
    """What ``backend`` declares about itself for the command, or the defaults."""
    # The backend contract and the spawner (below) are imported when a backend is used, not
    # with the names: the command's parser lists the names before anything runs.
    from .backend import BackendInfo

    declared = getattr(backend, "info", None)
    info = declared() if callable(declared) else None
    return info if isinstance(info, BackendInfo) else BackendInfo()


def check_binary(backend: Backend, options: Any) -> None:
    """`CliNotFound` unless the CLI an agent with these (parsed) options would spawn is an
    executable file, looked for as its turns look: the binary of the backend's
    ``version_command`` (every turn's, per turn or warm, runs the same binary) on the
    PATH of the CLI's own environment, a relative path from its cwd. A stat or a PATH
    lookup, nothing spawned; a backend without ``version_command`` is not checked."""
    from ._driver._spawn import find_executable

    version_command = getattr(backend, "version_command", None)
    if version_command is None:
        return
    command = version_command(options)
    binary = str(command.argv[0])
    found = find_executable(binary, command.env)
    if found is not None:
        found = os.path.join(command.cwd or "", found)
        if os.path.isfile(found) and os.access(found, os.X_OK):
            return
    info = backend_info(backend)
    option = info.binary_option
    fix = f"point {option}= at the CLI's executable file" + (
        f", or {info.install}" if info.install else ""
    )
    raise CliNotFound(backend.name, binary, fix, option=option)


# What the runtime calls on a backend object (Backend is a Protocol, not a base class).
_BACKEND_METHODS = ("parse_options", "command", "translator")


def resolve_backend(backend: str | Backend) -> Backend:
    """The backend named ``backend`` (an entry point of ``agentrt.backends``), or
    ``backend`` itself when it is already a backend object; `InvalidOptions` for anything
    else."""
    if not isinstance(backend, str):
        if not isinstance(getattr(backend, "name", None), str) or not all(
            callable(getattr(backend, method, None)) for method in _BACKEND_METHODS
        ):
            raise InvalidOptions(
                "backend", backend, "must be a backend name such as 'claude', or a Backend object"
            )
        return backend
    found = _loaded.get(backend)
    if found is not None:
        return found
    load: Callable[[], Any]
    value = SHIPPED.get(backend)
    if value is not None:
        module, _, attribute = value.partition(":")
        load = functools.partial(_load_shipped, module, attribute)
    else:
        group = _entry_points(GROUP)
        matches = group.select(name=backend)
        if not matches:
            raise BackendNotFound(backend, tuple(sorted({*group.names, *SHIPPED})))
        entry = next(iter(matches))
        value, load = entry.value, entry.load
    try:
        loaded = load()
        instance: Backend = loaded() if isinstance(loaded, type) else loaded
    except Exception as exc:
        raise InvalidOptions(
            "backend", backend, f"its entry point {value} failed to load: {exc!r}"
        ) from exc
    _loaded[backend] = instance
    return instance

"""Finding a backend by name: the ``agentrt.backends`` entry-point group.

agentrt never imports a backend module at top level; ``backend="claude"`` loads the entry
point the first time it is asked for, and the backend object is shared from then on
(backends are pure).
"""

from __future__ import annotations

from importlib.metadata import entry_points

from ._errors import BackendNotFound, InvalidOptions
from .backend import Backend

GROUP = "agentrt.backends"

_loaded: dict[str, Backend] = {}


def resolve_backend(backend: str | Backend) -> Backend:
    """The backend named ``backend`` (an entry point of ``agentrt.backends``), or
    ``backend`` itself when it is already a backend object."""
    if not isinstance(backend, str):
        return backend
    found = _loaded.get(backend)
    if found is not None:
        return found
    group = entry_points(group=GROUP)
    matches = group.select(name=backend)
    if not matches:
        raise BackendNotFound(backend, tuple(sorted(group.names)))
    entry = next(iter(matches))
    try:
        loaded = entry.load()
        instance: Backend = loaded() if isinstance(loaded, type) else loaded
    except Exception as exc:
        raise InvalidOptions(
            "backend", backend, f"its entry point {entry.value} failed to load: {exc!r}"
        ) from exc
    _loaded[backend] = instance
    return instance

"""An agent's queued requests as the console lists them: read from the store that keeps
them (`RequestStore`, so another program's queue is listed too), each with its key and a
preview of its prompt, redacted as the turn history is."""

from __future__ import annotations

from typing import Any

from .._requests import ref_of
from .._stores._request_store import RequestStore
from ._shown import shown

# The characters of a queued prompt the page shows: enough to tell requests apart.
PREVIEW = 200
NO_REQUESTS = "the store keeps no requests: the count and keys are this runtime's"


def _preview(prompt: str | None) -> str | None:
    if prompt is None:
        return None
    text = shown(prompt)  # redacted before it is cut, so no secret is left half shown
    return text if len(text) <= PREVIEW else text[:PREVIEW] + "..."


async def queued(store: RequestStore | None, name: str) -> dict[str, Any]:
    """The queued requests of ``name``, in the order they will run: ``ref`` (the `Ref`'s id
    `withdraw` takes, in decimal: 62 bits, more than a page's numbers hold exactly; None
    for one written through the store's API, which has no `Ref`),
    ``key``, ``prompt`` (a preview) and ``accepted_at`` (wall clock; the page shows its
    age). ``store``: the store's `StoreCapabilities.requests` (None: it keeps none, and
    ``requests`` is None)."""
    if store is None:
        return {"why": NO_REQUESTS, "requests": None}
    requests = [
        {
            "ref": None if ref_of(name, request.id) is None else request.id,
            "key": None if request.key is None else shown(request.key),
            "prompt": _preview(request.prompt),
            "accepted_at": request.accepted_at,
        }
        for request in await store.queued_requests(name)
    ]
    return {"why": None, "requests": requests}

"""Sphinx configuration of agentrt's documentation (`make docs` builds it into docs/_build).

Sphinx, as trio uses: autodoc writes the reference from the docstrings the runtime already
has (the same text `help()` shows), and MyST reads the Markdown pages, which stay readable
on a repository browser as they were before there was a site.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

project = "agentrt"
author = "the agentrt authors"
copyright = "the agentrt authors"

extensions = ["sphinx.ext.autodoc", "myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]
# `name` in a docstring is a cross-reference, and one the reference lacks is an error
# (nitpicky), but for the names of the standard library and other projects: with no network
# at build time there is no intersphinx inventory to find them in.
default_role = "py:obj"
nitpicky = True
nitpick_ignore_regex = [
    ("py:.*", r"(collections|typing|types|os|pathlib|signal|contextlib|asyncio)(\..*)?"),
    ("py:.*", r"(trio|trio_util|msgspec|attrs|cattrs|psycopg|mcp|opentelemetry)(\..*)?"),
    # Private types in signatures (a public name's annotation may name one), and the
    # pieces autodoc cuts a subscripted annotation into.
    ("py:.*", r"agentrt\._.*|AgentFactory|.*\[.*|.*\].*"),
]
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# Links to a page's headings: [the bounds](../explanation/concepts.md#every-hang-is-bounded).
myst_heading_anchors = 3
html_theme = "alabaster"
html_title = "agentrt"
# Wide enough for the code blocks, which are 100 columns as the code is.
html_theme_options = {"page_width": "1240px", "sidebar_width": "240px", "body_max_width": "none"}

# Pages that work under way adds (each named in the index's tables of contents). Until a
# page exists the build leaves its entry out and lists it; tests/test_docs.py fails once a
# listed page exists, so the entry is dropped from here when the page lands.
PENDING_PAGES: tuple[str, ...] = ()

_HERE = Path(__file__).parent


def missing_pages() -> list[str]:
    """The pending pages not written yet."""
    return [page for page in PENDING_PAGES if not (_HERE / f"{page}.md").exists()]


def _leave_out_missing(app: Any, docname: str, source: list[str]) -> None:
    if docname != root_doc:
        return
    missing = missing_pages()
    if missing:
        print(f"pages not written yet, left out of the contents: {', '.join(missing)}")
    pattern = re.compile(rf"(?m)^(?:{'|'.join(map(re.escape, missing))})\n") if missing else None
    if pattern is not None:
        source[0] = pattern.sub("", source[0])


# Where a docstring's unqualified name is looked for when its own module has no such name:
# a store protocol's docstring names `StoreError`, which lives in agentrt.
_PUBLIC_MODULES = ("agentrt", "agentrt.store", "agentrt.backend", "agentrt.testing")


def _resolve_public_name(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"]
    domain = env.get_domain("py")
    owner = node.get("py:class")
    candidates = [f"{module}.{target}" for module in _PUBLIC_MODULES]
    if owner:  # a method named in its class's docstring
        candidates = [f"{module}.{owner}.{target}" for module in _PUBLIC_MODULES] + candidates
    # A field of a documented class (`InitEvent.cli_version`) links to its class's entry.
    if "." in target:
        owner_name = target.rsplit(".", 1)[0]
        candidates += [f"{module}.{owner_name}" for module in _PUBLIC_MODULES]
    for name in candidates:
        if name in domain.objects:
            return domain.resolve_xref(
                env, node["refdoc"], app.builder, "obj", name, node, contnode
            )
    return None


def setup(app: Any) -> None:
    app.connect("source-read", _leave_out_missing)
    app.connect("missing-reference", _resolve_public_name)

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
# `name` in a docstring is a cross-reference to that name where the reference has it.
default_role = "py:obj"
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
# Links to a page's headings: [the bounds](../explanation/concepts.md#every-hang-is-bounded).
myst_heading_anchors = 3
html_theme = "alabaster"
html_title = "agentrt"

# Pages that work under way adds (each named in the index's tables of contents). Until a
# page exists the build leaves its entry out and lists it; tests/test_docs.py fails once a
# listed page exists, so the entry is dropped from here when the page lands.
PENDING_PAGES = ("asyncio", "backends", "console", "gemini", "hooks", "qwen", "workspaces")

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


def setup(app: Any) -> None:
    app.connect("source-read", _leave_out_missing)

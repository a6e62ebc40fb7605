"""The code blocks of the README, the changelog and the documentation site, as Markdown
parses them (markdown-it, the parser MyST builds on), for the tests that run them."""

from __future__ import annotations

from pathlib import Path

import attrs
from markdown_it import MarkdownIt

ROOT = Path(__file__).parent.parent
DOCS = ROOT / "docs"


@attrs.frozen
class Block:
    path: Path
    line: int
    info: str  # a fence's info string; "" for an indented block
    text: str
    fenced: bool

    @property
    def language(self) -> str:
        return self.info.split()[0] if self.info else ""

    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def pages() -> list[Path]:
    """Every Markdown page: the README, the changelog and the site's (not its build)."""
    site = [p for p in sorted(DOCS.rglob("*.md")) if "_build" not in p.relative_to(DOCS).parts]
    return [ROOT / "README.md", ROOT / "CHANGELOG.md", *site]


def blocks(path: Path) -> list[Block]:
    """The code blocks of one page, fenced and indented, in order."""
    tokens = MarkdownIt("commonmark").parse(path.read_text())
    return [
        Block(
            path,
            token.map[0] + 1 if token.map else 0,
            token.info.strip(),
            token.content,
            token.type == "fence",
        )
        for token in tokens
        if token.type in ("fence", "code_block")
    ]


def all_blocks() -> list[Block]:
    return [block for path in pages() for block in blocks(path)]


def doc_block(containing: str, language: str = "python") -> str:
    """The text of the one block of ``language`` holding ``containing``, wherever it is (a
    block shown on two pages must read the same on both)."""
    texts = {b.text for b in all_blocks() if b.language == language and containing in b.text}
    assert len(texts) == 1, f"{len(texts)} different {language} blocks hold {containing!r}"
    return texts.pop()

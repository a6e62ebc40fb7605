"""The module-level API's spelling, written from the operations' declaration
(`agentrt._operations`): ``python -m agentrt._api_written`` rewrites, in agentrt/_api.py, the
line that makes each module-level function from its `Runtime` method, and in
agentrt/__init__.py, each one's export and ``__all__``.

They are written out, not made in a loop, because a type checker reads a module's names
only as written: ``agentrt.ask`` must be a line of agentrt/_api.py for a user's mypy to see
its signature. tests/test_operations.py fails, naming this command, while a file is stale.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from ._operations import OPERATIONS, RUNTIME_WIDE

COMMAND = "python -m agentrt._api_written"

_PACKAGE = Path(__file__).resolve().parent


def module_level() -> list[str]:
    """The names of the module-level functions: every public operation, every runtime-wide
    method."""
    return sorted({name for name, op in OPERATIONS.items() if op.public} | RUNTIME_WIDE)


def _rewrite_run(text: str, pattern: str, lines: Sequence[str], where: str) -> str:
    """``text`` with its one run of lines matching ``pattern`` replaced by ``lines``."""
    old = text.splitlines(keepends=True)
    found = [i for i, line in enumerate(old) if re.match(pattern, line)]
    if not found or found != list(range(found[0], found[-1] + 1)):
        raise ValueError(f"{where}: the lines matching {pattern!r} are not one run of lines")
    new = [f"{line}\n" for line in lines]
    return "".join([*old[: found[0]], *new, *old[found[-1] + 1 :]])


def _all_order(name: str) -> tuple[int, str]:
    # As ruff sorts an ``__all__`` (RUF022): constants, then classes, then the rest.
    kind = 0 if name.isupper() else 1 if name[0].isupper() else 2
    return kind, name


def api_text(text: str) -> str:
    """agentrt/_api.py's ``text`` with one line per module-level function."""
    names = module_level()
    lines = [f"{name} = _on_current_runtime(Runtime.{name})" for name in names]
    return _rewrite_run(text, r"\w+ = _on_current_runtime\(", lines, "agentrt/_api.py")


def init_text(text: str) -> str:
    """agentrt/__init__.py's ``text`` exporting each module-level function, and with the
    ``__all__`` of what it exports."""
    names = module_level()
    # Under `if TYPE_CHECKING:`: the package imports each name when it is first asked for.
    lines = [f"    from ._api import {name} as {name}" for name in names]
    text = _rewrite_run(text, r"    from \._api import ", lines, "agentrt/__init__.py")
    exported = re.findall(r"^\s*from \S+ import (\w+) as \1$", text, re.M)
    start = text.index("__all__ = [\n") + len("__all__ = [\n")
    end = text.index("]\n", start)
    listed = "".join(f'    "{name}",\n' for name in sorted(exported, key=_all_order))
    return text[:start] + listed + text[end:]


def rewritten() -> dict[Path, str]:
    """Each file this writes, with the text it should have."""
    api, init = _PACKAGE / "_api.py", _PACKAGE / "__init__.py"
    return {api: api_text(api.read_text()), init: init_text(init.read_text())}


def main() -> None:
    for path, text in rewritten().items():
        if path.read_text() != text:
            path.write_text(text)
            print(f"rewrote {path.name}")


if __name__ == "__main__":
    main()

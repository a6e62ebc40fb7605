"""``python -m agentrt``: the ``agentrt`` command."""

from ._cli import main

raise SystemExit(main())

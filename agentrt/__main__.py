"""``python -m agentrt``: the ``agentrt`` command."""

from agentrt_command import main

raise SystemExit(main())

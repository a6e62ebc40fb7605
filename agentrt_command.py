"""The ``agentrt`` console script. It lives outside the agentrt package so that it runs
before the package is imported: a Ctrl+C during those imports (a quarter of a second)
then ends the command as it ends any program, not with a KeyboardInterrupt traceback."""

from __future__ import annotations

import signal


def main() -> int:
    """Run the ``agentrt`` command; returns its exit code."""
    # Ctrl+C's default action (the process ends by SIGINT, which a shell shows as 130)
    # until agentrt._cli.main hands it to trio; an inherited "ignore" stays.
    if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    from agentrt._cli import main as run

    return run()

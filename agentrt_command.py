"""The ``agentrt`` console script. It lives outside the agentrt package so that it runs
before the package is imported: a Ctrl+C during those imports (a tenth of a second or more)
then ends the command as it ends any program, not with a KeyboardInterrupt traceback."""

from __future__ import annotations

# The C module under `signal`: importing `signal` itself builds its enums, a window (long on a
# loaded machine) in which a Ctrl+C would still end in a traceback.
import _signal

# Ctrl+C's default action (the process ends by SIGINT, which a shell shows as 130) until
# agentrt._cli.main hands it to trio; an inherited "ignore" stays. Set as this module is
# imported, not when main() is called: the console script's `from agentrt_command import
# main` is itself part of the window.
if _signal.getsignal(_signal.SIGINT) is _signal.default_int_handler:
    _signal.signal(_signal.SIGINT, _signal.SIG_DFL)


def main() -> int:
    """Run the ``agentrt`` command; returns its exit code."""
    from agentrt._cli import main as run

    return run()

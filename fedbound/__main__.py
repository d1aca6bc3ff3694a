"""``python -m fedbound`` and the ``fedbound`` command (:func:`main`, its entry point).

The command holds SIGINT and SIGTERM blocked from the first instruction of fedbound's own
code: importing the engine (numpy, the command's modules) takes tenths of a second, and a
Ctrl-C that landed there used to end in Python's KeyboardInterrupt traceback. A signal that
arrives meanwhile waits, and is taken as soon as :func:`fedbound.verify.cli.main` can answer
it: its one line and status 130 (SIGTERM too). What remains is the interpreter's own
start-up, before any of fedbound's code runs.
"""

import signal
import sys

#: the signals held back while the command imports itself
HELD = (signal.SIGINT, signal.SIGTERM)


def main() -> int:
    """Run the ``fedbound`` command on ``sys.argv`` (see the module docstring)."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, HELD) if hasattr(signal, "pthread_sigmask") else None
    from fedbound.verify.cli import main as command

    return command(mask=mask)


if __name__ == "__main__":
    sys.exit(main())

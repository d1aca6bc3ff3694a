"""The ``fedbound`` command: argument parsing and output only; the work is in the library.

One module per command (:data:`MODULES`), each with its :class:`~.common.Command` s; the
commands of the registered plugins' choosers run as ``fedbound choose NAME``, and a
chooser's aliases as commands of their own (:func:`expand_alias`).

The exit statuses mean the same for every command (``common.EXIT_STATUS``); each command's
``--help`` shows those it can return.

Its public API is :func:`main` (``__all__``), the command run in-process:
``main(["check", "mllsgd.theorem1"])`` is ``fedbound check mllsgd.theorem1`` and returns its
exit status. The command modules are internal.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import tempfile
import textwrap
import threading
import traceback
from collections.abc import Sequence

from ..exits import ExitCalled, exit_guarded
from . import bound, check, choose, listing, plugins, rate, reproduce, scenario, search, sweep
from .common import Exit, Parser, UsageError, exit_codes, limit_options, warn

__all__ = ["main"]

MODULES = (listing, bound, scenario, check, search, rate, choose, reproduce, sweep, plugins)
COMMANDS = {c.name: c for m in MODULES for c in m.COMMANDS}
#: options of the command line before the command that take a value
_VALUED = ("--plugin", "--max-memory", "--max-steps", "--max-scenarios", "--max-input")


def _version() -> str:
    from fedbound import __version__

    return __version__


def parser() -> argparse.ArgumentParser:
    ap = Parser(prog="fedbound", formatter_class=argparse.RawDescriptionHelpFormatter,
                usage=USAGE, description="Executable convergence theory for hierarchical, "
                                         "multi-level and anarchic federated learning.",
                epilog=f"{command_list()}\n\n{MORE}\n\nexit status:\n{exit_codes()}")
    ap.add_argument("--version", action="version", version=f"fedbound {_version()}")
    ap.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                    help="import MODULE to register its results (repeatable; also "
                         "FEDBOUND_PLUGINS and the entry-point group fedbound.plugins)")
    ap.add_argument("--debug", action="store_true", help="show the traceback of an internal error")
    limit_options(ap, argparse.SUPPRESS, shown=())
    sub = ap.add_subparsers(dest="command", parser_class=Parser, metavar="COMMAND",
                            help=argparse.SUPPRESS)
    for c in COMMANDS.values():
        p = sub.add_parser(c.name, prog=f"fedbound {c.name}", help=c.help,
                           description=textwrap.fill(c.description or c.help, 79),
                           formatter_class=argparse.RawDescriptionHelpFormatter,
                           epilog=f"example:\n  {c.example}\n\nexit status:\n{exit_codes(c.exits)}")
        p.add_argument("--json", action="store_true", help="machine-readable output")
        p.set_defaults(fn=c.run)
        c.arguments(p)
        limit_options(p, argparse.SUPPRESS, shown=c.limits)
    return ap


def command_parsers() -> dict[str, argparse.ArgumentParser]:
    """Every command line's argument parser by the command line that runs it (``fedbound``,
    ``fedbound check``, ..., and ``fedbound choose NAME`` for each registered chooser): what
    the CLI reference of the documentation is generated from."""
    from ..choose import choosers, command_of

    top = parser()
    sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction))
    out = {"fedbound": top, **{f"fedbound {name}": p for name, p in sub.choices.items()}}
    for name, cls in choosers().items():
        out[f"fedbound choose {name}"] = choose.chooser_parser(cls, command_of(cls))
    return out


USAGE = "fedbound [--version] [--plugin MODULE] [--debug] COMMAND [options]"
MORE = "fedbound COMMAND --help shows the options of a command, an example and its exit statuses."


def command_list() -> str:
    """The commands with their one-line help, aligned (what ``fedbound`` alone shows)."""
    width = max(map(len, COMMANDS))
    return "commands:\n" + "\n".join(f"  {c.name:<{width}}  {c.help}" for c in COMMANDS.values())


def _command_index(argv: Sequence[str]) -> int | None:
    """Where the command is in ``argv``: the first word that is neither an option before it
    nor the value of one."""
    i = 0
    while i < len(argv):
        word = argv[i]
        if not word.startswith("-"):
            return i
        i += 2 if word in _VALUED else 1
    return None


def expand_alias(argv: Sequence[str]) -> list[str]:
    """``argv`` with a chooser's alias replaced by ``choose NAME`` (a word in the place of the
    command that is no command: the plugins named on the command line and installed are
    loaded to look it up)."""
    argv = list(argv)
    i = _command_index(argv)
    if i is None or argv[i] in COMMANDS:
        return argv
    from ..plugins import load_plugins

    load_plugins([argv[j + 1] for j in range(i) if argv[j] == "--plugin" and j + 1 < i])
    name = choose.alias_command(argv[i])
    return argv if name is None else [*argv[:i], "choose", name, *argv[i + 1:]]


def _terminate(signum, frame):
    """SIGTERM: stop like Ctrl-C (finished results are kept, exit status 130)."""
    raise KeyboardInterrupt("terminated (SIGTERM)")


class _Signals:
    """SIGINT and SIGTERM while a command runs (main thread only): a KeyboardInterrupt (the
    command stops, keeps what it finished and answers 130) until the command answers
    (:meth:`answer`); from then on nothing, so that a signal that lands after the answer,
    while it is printed or while the interpreter shuts down, leaves the answer's exit
    status (5 of 10 ``choose hfl`` without options, whose usage line comes at once, were
    killed by a signal after it: no line of theirs, a status of 143). From the entry point
    (``ignore``) both are ignored after the command, until the process has exited (ignored,
    not blocked: a mask is a thread's, and a signal sent to the process is delivered to any
    thread that does not block it, a BLAS thread say, and its default action ends the
    process)."""

    HELD = (signal.SIGINT, signal.SIGTERM)

    def __init__(self, ignore: bool):
        self.open = True
        self.ignore = ignore
        self.previous = {}
        if threading.current_thread() is threading.main_thread():
            self.previous = {s: signal.signal(s, self) for s in self.HELD}

    def __call__(self, signum, frame):
        if self.open:
            if signum == signal.SIGTERM:
                _terminate(signum, frame)
            raise KeyboardInterrupt

    def answer(self) -> None:
        """The command answers now: a signal from here on is dropped."""
        self.open = False

    def restore(self) -> None:
        """The handlers as they were before the command (ignored, from the entry point)."""
        for s, handler in self.previous.items():
            signal.signal(s, signal.SIG_IGN if self.ignore else handler)


#: the longest line fedbound prints for an error: a value echoed from the input (a string of
#: megabytes, a list of thousands of entries) is cut to fit
LINE_MAX = 500


def one_line(text: object) -> str:
    """``text`` on one line of at most :data:`LINE_MAX` characters (whitespace runs, line
    breaks included, become one space; what is cut is counted)."""
    text = " ".join(str(text).split())
    if len(text) <= LINE_MAX:
        return text
    return f"{text[:LINE_MAX - 40]}... ({len(text) - LINE_MAX + 40} more characters)"


class _NamedStream:
    """Standard output as the command writes it: an ``OSError`` of a write or a flush (a full
    disk, a closed pipe) names the stream, so that it is reported as the environment's
    failure on "standard output" (exit 74)."""

    def __init__(self, stream):
        self._stream = stream

    def __getattr__(self, name):
        return getattr(self._stream, name)

    def write(self, text):
        try:
            return self._stream.write(text)
        except OSError as e:
            raise OSError(e.errno, e.strerror, "standard output") from None

    def flush(self):
        try:
            return self._stream.flush()
        except OSError as e:
            raise OSError(e.errno, e.strerror, "standard output") from None


def _environment_failed(e: OSError, stdout) -> int:
    """Exit 74: one line naming the path (no traceback log: the environment failed, not
    fedbound). A failed standard output is replaced by /dev/null, so that the interpreter's
    last flush at exit does not fail again."""
    where = e.filename if e.filename is not None else "standard output"
    what = e.strerror or type(e).__name__
    if where == "standard output":
        with contextlib.suppress(OSError, ValueError, AttributeError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stdout.fileno())
    print(f"fedbound: I/O error: {one_line(f'{where}: {what}')} (the environment's I/O failed; "
          "nothing of fedbound's is wrong)", file=sys.stderr)
    return 74


def main(argv: Sequence[str] | None = None, *, mask=None) -> int:
    """Run the ``fedbound`` command on ``argv`` (default ``sys.argv[1:]``) and return its exit
    status. ``mask``: the signal mask to restore once the command can take a Ctrl-C (the
    entry point, ``fedbound.__main__``, holds SIGINT and SIGTERM blocked until then, and
    they are ignored once the command has answered: :class:`_Signals`). Every worker
    process and fork server the command started is ended before it says it was interrupted
    (``verify.pool.teardown``), and, from the entry point, before it returns."""
    argv = list(sys.argv[1:] if argv is None else argv)
    signals = _Signals(ignore=mask is not None)
    stdout = sys.stdout
    sys.stdout = _NamedStream(stdout)
    try:
        with exit_guarded():  # os._exit from a plugin: exits.ExitCalled, answered below
            return _command(argv, mask, signals, stdout)
    except KeyboardInterrupt as e:  # landed while the command began to answer
        signals.answer()
        return _interrupted(e)
    finally:
        if mask is not None:
            _teardown()
        sys.stdout = stdout
        signals.restore()


def _command(argv: list[str], mask, signals: _Signals, stdout) -> int:
    """The command of :func:`main`: its work, then its answer (:meth:`_Signals.answer`)."""
    try:
        if mask is not None:  # a signal that came while the command imported itself: now
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        with _import_hooks(argv):
            out = _work(argv, signals)
        signals.answer()
        status = 0
        if isinstance(out, Exit):
            out, status = out.payload, out.status
        if out is not None:
            from ..scenario import json_text

            print(json_text(out))
        sys.stdout.flush()
        return status
    except (UsageError, ValueError, NotImplementedError) as e:
        signals.answer()
        print(f"fedbound: error: {one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        signals.answer()
        return _interrupted(e)
    except OSError as e:  # a full disk, a closed pipe, permission denied, an I/O error
        signals.answer()
        return _environment_failed(e, stdout)
    except (Exception, ExitCalled) as e:  # noqa: BLE001 - one line and a log, never a traceback
        signals.answer()
        if "--debug" in argv:
            traceback.print_exc()
        else:
            fd, log = tempfile.mkstemp(prefix="fedbound-error-", suffix=".log")
            with os.fdopen(fd, "w") as f:
                traceback.print_exc(file=f)
            print(f"fedbound: internal error: {one_line(_described(e))} (traceback in {log}; run "
                  "with --debug to show it)", file=sys.stderr)
        return 70


def _described(e: BaseException) -> str:
    """An internal error in words: a plugin's ``os._exit`` named as such, a broken process
    pool with the statuses its workers ended with (``verify.exits``)."""
    if isinstance(e, ExitCalled):
        from ..boundary import plugin_of

        return (f"plugin {plugin_of(e.caller)!r} called "
                f"os._exit({e.status!r}) while the command ran (a plugin may not end the process)")
    text = f"{type(e).__name__}: {e}"
    pool = sys.modules.get(f"{__package__.rpartition('.')[0]}.pool")
    if pool is not None and type(e).__name__ == "BrokenProcessPool":
        from ..exits import worker_exits_text

        ended = worker_exits_text(pool.abrupt_exits())
        text += f" ({ended})" if ended else ""
    return text


def _work(argv: list[str], signals: _Signals):
    """What the command ``argv`` computes (its output, or an :class:`Exit`)."""
    ap = parser()
    args = ap.parse_args(expand_alias(argv))
    if args.command is None:  # fedbound alone: how to use it, and the commands
        signals.answer()
        print(f"usage: {USAGE}\n\n{command_list()}\n\n{MORE}", file=sys.stderr)
        raise UsageError("a COMMAND is required")
    if check.pool_ahead(args):
        from ..pool import start_fork_server

        start_fork_server(() if args.no_figures else ("fedbound.verify.plots",))
    from .. import limits
    from ..plugins import failures, load_plugins

    with limits.configured(memory=getattr(args, "max_memory", None),
                           steps=getattr(args, "max_steps", None),
                           scenarios=getattr(args, "max_scenarios", None),
                           input=getattr(args, "max_input", None)):
        messages = load_plugins(args.plugin)
        named = [f for f in failures(args.plugin) if f.explicit]
        if named:  # a plugin the user named: bad input; an installed one: a warning
            raise UsageError(named[0].message)
        for message in messages:
            warn(message)
        import numpy as np

        with np.errstate(all="ignore"):  # every result is checked for finiteness
            return args.fn(args)


@contextlib.contextmanager
def _import_hooks(argv: list[str]):
    """For the command ``argv``: torch's import held back from signals (a Ctrl-C inside it
    aborts the interpreter), and each plugin that is not fedbound's own (installed, in
    FEDBOUND_PLUGINS or named by ``--plugin``) named on a terminal when its import takes
    long; a plugin's import stays interruptible (``verify.interrupts``)."""
    from ..interrupts import slow_imports, uninterrupted_imports
    from ..plugins import builtin, modules

    named = {argv[i + 1] for i in range(len(argv) - 1) if argv[i] == "--plugin"}
    with uninterrupted_imports("torch"), slow_imports((set(modules()) | named) - set(builtin()),
                                                      _slow_plugin):
        yield


def _interrupted(e: KeyboardInterrupt) -> int:
    """Exit 130: the command's worker processes ended, then one line (what it kept)."""
    from ..interrupts import answered

    _teardown()
    answered()
    print("fedbound: interrupted" + (f": {one_line(e)}" if str(e) else ""), file=sys.stderr)
    return 130


def _teardown() -> None:
    """End the worker processes and the fork server of this process (``verify.pool``),
    if it has imported it (then it may have started some)."""
    pool = sys.modules.get(f"{__package__.rpartition('.')[0]}.pool")
    if pool is not None:
        pool.teardown()


def _slow_plugin(module: str) -> None:
    """The line on a terminal for a plugin that takes long to import (interrupts.slow_imports)."""
    from ..interrupts import SLOW_IMPORT

    if sys.stderr.isatty():
        print(f"fedbound: importing plugin {module!r} has taken more than {SLOW_IMPORT:g} s "
              "(Ctrl-C stops it)", file=sys.stderr, flush=True)

"""What the commands of ``fedbound`` share: the exit statuses, the one-line usage error, the
parsers of option values and the scenario reader."""

from __future__ import annotations

import argparse
import math
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field

#: what each exit status means; a command's ``--help`` shows the statuses it can return
#: (:attr:`Command.exits`, in its own words) and those every command can (:data:`EVERY_COMMAND`)
EXIT_STATUS = {
    0: "yes: the bound holds, the parameters are admissible, the job is done",
    1: "no: a bound is violated, a stored refutation went stale, a search found a violation "
       "of a result not recorded as refuted, the parameters given to bound are inadmissible",
    2: "bad input or usage (one line naming the field)",
    3: "inconclusive, with --strict",
    4: "finished, but some rows ended in an error (check --all, sweep)",
    70: "internal error (one line; the traceback in a log file, or on screen with --debug)",
    74: "the environment's I/O failed: a full disk, a closed pipe, permission denied (one line "
        "naming the path)",
    130: "interrupted (what finished is kept)",
}
#: the statuses any command can return, whatever it does
EVERY_COMMAND = (2, 70, 74, 130)


def exit_codes(exits: Mapping[int, str] | None = None) -> str:
    """The exit-status block of a ``--help``: the statuses ``exits`` names, in its words,
    then those of :data:`EVERY_COMMAND`, as an aligned, wrapped list (every status of
    :data:`EXIT_STATUS` when ``exits`` is None: the top-level help)."""
    meanings = dict(EXIT_STATUS) if exits is None else {
        **exits, **{c: EXIT_STATUS[c] for c in EVERY_COMMAND}}
    lines = []
    for code in sorted(meanings):
        wrapped = textwrap.wrap(meanings[code], width=72)
        lines += [f"  {code:<4} {wrapped[0]}", *(f"       {w}" for w in wrapped[1:])]
    return "\n".join(lines)


#: the resource limits (verify.limits) by kind: option, metavar and help
LIMIT_OPTIONS = {
    "memory": ("--max-memory", "SIZE", "memory one scenario may use, e.g. 8G (default: half the "
               "machine's memory, or of its container's limit; also FEDBOUND_MAX_MEMORY)"),
    "steps": ("--max-steps", "N", "operations one scenario may take, e.g. 1e14 (default 1e13; "
              "also FEDBOUND_MAX_STEPS)"),
    "scenarios": ("--max-scenarios", "N", "scenarios of one sweep, search budget or battery, runs "
                  "of a chooser's grid (default 1e6; also FEDBOUND_MAX_SCENARIOS)"),
    "input": ("--max-input", "SIZE", "bytes of one input file or standard input, e.g. 64M "
              "(default 8M; also FEDBOUND_MAX_INPUT)"),
}


class UsageError(Exception):
    """Bad input from the command line (exit status 2)."""


@dataclass
class Exit:
    """A command's output (printed as JSON unless None) and its exit status."""

    payload: object
    status: int


@dataclass(frozen=True)
class Command:
    """One subcommand: its ``name``, the function that ``run``s it on the parsed arguments
    (returning what to print as JSON, or an :class:`Exit`), its one-line ``help``, a longer
    ``description``, a usage ``example``, the function that adds its ``arguments``, the exit
    statuses it returns beside those of every command (``exits``: status -> meaning) and the
    resource ``limits`` its work can exceed (kinds of :data:`LIMIT_OPTIONS`), the only ones
    its ``--help`` shows."""

    name: str
    run: Callable
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    example: str
    description: str = ""
    exits: Mapping[int, str] = field(default_factory=lambda: {0: "done"})
    limits: tuple[str, ...] = ()


class Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, no usage dump
        raise UsageError(message)

    def _get_values(self, action, arg_strings):
        """argparse drops a value "--" (``--battery=--``) and passes an empty list as the
        option's value; here it is the missing value it is."""
        if action.nargs is None and action.option_strings and arg_strings == ["--"]:
            raise argparse.ArgumentError(action, "expected one argument, got '--'")
        return super()._get_values(action, arg_strings)


def json_object(text: str | None, what: str) -> dict:
    from ..scenario import parse_json

    if text is None:
        raise UsageError(f"{what} JSON is required")
    data = parse_json(text, what)
    if not isinstance(data, dict):
        raise UsageError(f"{what} must be a JSON object of parameter values")
    return data


def _int63(text: str, rule: str) -> int:
    """An integer option in [0, 2^63) (what int64 tensors and numpy seeds take)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if not 0 <= value < 2**63:
        raise argparse.ArgumentTypeError(f"{value} must be {rule}")
    return value


def seed(text: str) -> int:
    """A seed option: an integer in [0, 2^63)."""
    return _int63(text, "an integer in [0, 2^63)")


def count(text: str) -> int:
    """A count option (--battery may be 0): an integer >= 0 below 2^63."""
    return _int63(text, "an integer >= 0")


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"{text!r} must be a number of seconds > 0")
    return value


def names(text: str | None, option: str) -> list[str] | None:
    """A comma-separated list of names given as ``option`` (None when not given); ValueError
    naming the option for an empty entry ("", "a,,b", "a,"): not fewer names, nor none."""
    if text is None:
        return None
    out = [v.strip() for v in text.split(",")]
    if not all(out):
        raise ValueError(f"{option} must be comma-separated names, got {text!r}")
    return out


def limit_options(p: argparse.ArgumentParser, default, shown=tuple(LIMIT_OPTIONS)) -> None:
    """The resource limits (verify.limits), accepted before or after the command; the help
    lists the kinds ``shown`` (those the command's work can exceed) and hides the others,
    which are accepted all the same (the limits are process-wide settings)."""
    for kind, (option, metavar, text) in LIMIT_OPTIONS.items():
        p.add_argument(option, metavar=metavar, default=default,
                       help=text if kind in shown else argparse.SUPPRESS)


def warn(message: str) -> None:
    """One warning line on standard error ("fedbound: warning: ...")."""
    print(f"fedbound: warning: {message}", file=sys.stderr)


def one_torch_thread() -> None:
    """One torch thread in this process: the searches and sweeps of small scenarios run
    faster without intra-op threads (and --jobs parallelises across processes)."""
    import torch

    torch.set_num_threads(1)


@contextmanager
def progress_bar(**kwargs):
    """A tqdm progress bar on standard error: redrawn in place on a terminal; elsewhere (a
    log, CI) a line at least every 30 s of a long run and none for a short one
    (:class:`verify.cli.progress.LogBar`)."""
    from tqdm import tqdm

    from .progress import LogBar

    if getattr(sys.stderr, "isatty", lambda: False)():
        bar = tqdm(file=sys.stderr, disable=None, **kwargs)
    else:
        bar = LogBar(file=sys.stderr, **kwargs)
    with bar:
        yield bar


#: seconds between two redraws of a :func:`stages` bar while a stage runs
TICK = 0.5


@contextmanager
def stages(desc: str, names: tuple[str, ...]) -> Iterator[Callable[[str], None]]:
    """A progress bar over the stages ``names`` of one long computation (a check: import the
    simulator, derive the parameters, simulate), on a terminal only: the context gives
    ``begin(name)``, which completes the stages before ``name`` and shows it running; the
    elapsed time moves while a stage runs (the bar is redrawn every :data:`TICK` seconds)."""
    with progress_bar(total=len(names), desc=desc, unit="stage",
                      bar_format="{desc} ({n_fmt}/{total_fmt}{postfix}) [{elapsed}]") as bar:
        def begin(name: str) -> None:  # drawn at once, however short the stage before
            bar.n = names.index(name)
            bar.set_postfix_str(name)

        done = threading.Event()

        def tick() -> None:
            while not done.wait(TICK):
                bar.refresh()

        ticker = None if bar.disable else threading.Thread(target=tick, daemon=True)
        if ticker is not None:
            ticker.start()
        try:
            yield begin
            bar.n = len(names)
            bar.set_postfix_str("done")
        finally:
            done.set()
            if ticker is not None:
                ticker.join()


def read_scenario(key: str, source: str | None, variant: str | None = None):
    """The scenario of ``--scenario`` (a file, or - for standard input) and the variant to
    check: a stored witness file (``verify.Witness``) gives its scenario and, unless
    ``--variant`` says otherwise, its variant."""
    from ..adapter import adapter_for

    if source is None:
        return adapter_for(key).default_scenario(), variant
    return scenario_from(key, *scenario_json(source), variant)


def scenario_json(source: str) -> tuple[dict, str]:
    """The JSON object of the ``--scenario`` file ``source`` (- for standard input), read
    once, and how messages name it (``--scenario s.json``)."""
    from ..inputs import read_text
    from ..scenario import parse_json

    what = "--scenario -" if source == "-" else f"--scenario {source}"
    data = parse_json(read_text(source, what), what)
    if not isinstance(data, dict):  # null is not the default scenario
        raise UsageError(f"{what} must be a JSON object (a scenario or a witness), got "
                         f"{'null' if data is None else type(data).__name__}")
    return data, what


def scenario_from(key: str, data: dict, what: str, variant: str | None = None):
    """The scenario of ``key`` that the JSON object ``data`` of :func:`scenario_json` holds,
    and the variant (see :func:`read_scenario`)."""
    from ..adapter import adapter_for
    from ..witnesses import as_witness

    ad = adapter_for(key)
    w = as_witness(data)
    if w is not None:
        if w.key != key:
            raise UsageError(f"{what} is a witness of {w.key}, not of {key}")
        return ad.load(w.scenario), variant or w.variant
    return ad.load(data), variant


def key_and_variant(p: argparse.ArgumentParser,
                    variant_help: str = "variant (default: the result's default)") -> None:
    p.add_argument("key", help="registered result, e.g. mllsgd.theorem1 (see fedbound list)")
    p.add_argument("--variant", help=variant_help)

"""``fedbound choose NAME``: a registered chooser (``verify.choose``) with the options it
declares; a chooser's aliases (``fedbound ALIAS ...``) run it too."""

from __future__ import annotations

import argparse
import re
import textwrap
from contextlib import contextmanager

from .common import (
    Command,
    Exit,
    Parser,
    UsageError,
    exit_codes,
    limit_options,
    names,
    progress_bar,
    read_scenario,
    scenario_from,
    scenario_json,
)

#: the exit statuses of fedbound choose beside those of every command
EXITS = {0: "the choices were made and printed (or the choosers listed)"}


def chooser_parser(cls, command: str) -> Parser:
    """The argument parser of ``fedbound choose COMMAND``, which runs the chooser ``cls``."""
    from ..choose import METHODS

    p = Parser(prog=f"fedbound choose {command}", description=textwrap.fill(cls.summary or cls.__doc__, 79),
               formatter_class=argparse.RawDescriptionHelpFormatter,
               epilog=(f"example:\n  {cls.example}\n\n" if cls.example else "")
               + f"exit status:\n{exit_codes(EXITS)}")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--curves", action="store_true",
                   help="with --json: each answer's prediction (or simulation) over every "
                        "configuration compared")
    p.add_argument("--variant", help=f"comma-separated variants of {cls.key} for the certified "
                                     "answers (default: every valid one)")
    p.add_argument("--method", choices=METHODS, default="both",
                   help="both (default): the certified, calibrated and simulated answers, each "
                        "simulated; bound: the certified and calibrated predictions only, "
                        "nothing simulated; simulate: the simulated search only")
    limit_options(p, None, shown=("memory", "steps"))
    cls.add_arguments(p)
    return p


def _listing() -> str:
    from ..choose import choosers

    rows = [f"  {name:<10} {cls.summary}" + (f" (also: {', '.join(cls.aliases)})" if cls.aliases
                                             else "")
            for name, cls in choosers().items()]
    return "registered choosers:\n" + ("\n".join(rows) if rows else "  none")


def run(args):
    from .. import limits
    from ..choose import choose, chooser_class, command_of

    if args.name is None:
        print(f"usage: fedbound choose NAME [options]\n\n{_listing()}\n\n"
              "fedbound choose NAME --help lists the options of one")
        return Exit(None, 0)
    cls = chooser_class(args.name)
    parser = chooser_parser(cls, command_of(cls))
    sub = parser.parse_args(args.rest)
    if sub.curves and not (args.json or sub.json):
        raise UsageError("--curves adds the per-time curves to the JSON: give it with --json")
    with limits.configured(memory=sub.max_memory, steps=sub.max_steps,
                           scenarios=sub.max_scenarios, input=sub.max_input), as_options(parser):
        chooser = cls.from_arguments(sub, scenario_reader(parser, sub))
        with progress_bar(unit="runs", leave=False) as bar:
            rep = choose(chooser, variants=names(sub.variant, "--variant"), method=sub.method,
                         progress=bar)
    if args.json or sub.json:
        return rep.as_dict(curves=sub.curves)
    print(rep.text())
    return None


def scenario_reader(parser: argparse.ArgumentParser, sub):
    """What a chooser's ``from_arguments`` reads its ``--scenario`` file with. The file is read
    once, here: the fields of a scenario (not a witness) that name the problem
    (``verify.named_problem.FIELDS``, those the chooser has options for) stand for their
    options where the command line gave none (``named_problem.take_file_fields``); the rest
    is the scenario, a bad field named as the file writes it (``--scenario s.json: T=-1``)."""
    from ..named_problem import FIELDS, take_file_fields
    from ..scenario import FieldError
    from ..witnesses import as_witness

    if getattr(sub, "scenario", None) is None:
        return lambda key, source: read_scenario(key, source)[0]
    data, what = scenario_json(sub.scenario)
    if as_witness(data) is None:
        choices = {a.dest: a.choices for a in parser._actions if a.dest in FIELDS}
        take_file_fields(data, sub, choices, what)

    def read(key: str, source: str):
        try:
            return scenario_from(key, data, what)[0]
        except FieldError:
            raise
        except ValueError as e:
            raise FieldError(f"{what}: {e}") from None
    return read


@contextmanager
def as_options(parser: argparse.ArgumentParser):
    """A ValueError raised inside the block names the chooser's fields as the user wrote
    them: a field the chooser validates under the name of its option (``alpha=1e-320``,
    ``delays[0..3]``) is written as that option (``--alpha=1e-320``, ``--delays[0..3]``); a
    ``FieldError`` (already named, e.g. after a scenario file's field) is left as it is."""
    options = {a.dest: a.option_strings[-1] for a in parser._actions
               if a.option_strings and a.option_strings[-1].startswith("--")}
    from ..scenario import FieldError

    try:
        yield
    except FieldError:
        raise
    except ValueError as e:
        text = str(e)
        for dest, option in options.items():
            text = re.sub(rf"(?<![\w.\-\[]){re.escape(dest)}(?=[=\[])", option, text)
        raise ValueError(text) from None


def alias_command(name: str) -> str | None:
    """The chooser that ``name`` is an alias of (``fedbound ALIAS ...`` runs ``fedbound choose
    COMMAND ...``), or None."""
    from ..choose import chooser_class, command_of

    try:
        cls = chooser_class(name)
    except ValueError:
        return None
    return command_of(cls) if name in cls.aliases else None


def arguments(p) -> None:
    p.add_argument("name", nargs="?", help="the registered chooser (fedbound choose lists them)")
    p.add_argument("rest", nargs=argparse.REMAINDER, help="the chooser's options")


COMMANDS = (Command(
    "choose", run, "choose a problem's knobs: certified, calibrated and simulated answers", arguments,
    "fedbound choose hfl --sizes 15,15 --delays 0.01,0.85,0.001,0.085,4,2,0.4,0.2 \\\n"
    "      --T 600 --L 1 --G 10 --sigma 10 --Delta 10\n"
    "  fedbound choose tdcd --t-comm 100 --t-comp 1\n"
    "  fedbound choose mllsgd --graph complete --t-comm 4",
    "Run a registered chooser: the certified answer of each valid variant of its bound, the "
    "calibrated answer (a prediction from constants estimated on the problem, not a "
    "certificate) and the simulated answer (an adaptive paired search on the problem), each "
    "simulated with its 95% interval and its regret against the best. fedbound choose lists "
    "the choosers, fedbound choose NAME --help the options of one; a chooser may also answer "
    "to an alias (choose-sync-time, choose-q-eta).", EXITS),)

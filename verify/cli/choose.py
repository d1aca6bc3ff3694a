"""``fedbound choose NAME``: a registered chooser (``verify.choose``) with the options its
declaration generates (``verify.declare``); a chooser's aliases (``fedbound ALIAS ...``) run
it too."""

from __future__ import annotations

import argparse
import textwrap

from .common import (
    Command,
    Exit,
    Parser,
    UsageError,
    exit_codes,
    limit_options,
    names,
    progress_bar,
    scenario_from,
    scenario_json,
)

#: the exit statuses of fedbound choose beside those of every command
EXITS = {0: "the choices were made and printed (or the choosers listed)"}


def chooser_parser(cls, command: str) -> Parser:
    """The argument parser of ``fedbound choose COMMAND``, which runs the chooser ``cls``: the
    options every chooser has, then one per input it declares (``Chooser.declared``)."""
    from ..choose import METHODS
    from ..declare import add_options, file_fields

    fields = scenario_fields(cls)
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
    if fields is not None:
        own = file_fields(cls.declared, fields)
        p.add_argument("--scenario", metavar="FILE",
                       help=f"a {cls.key} scenario JSON file (- for standard input): its fields, "
                            + (f"and the fields {', '.join(own)} of the options below" if own else "")
                            + " (options given override the file)")
    limit_options(p, None, shown=("memory", "steps"))
    add_options(p, cls.declared)
    return p


def scenario_fields(cls) -> list[str] | None:
    """The fields of the scenario of the chooser's result (None: the result has no adapter,
    the chooser reads no scenario file)."""
    import dataclasses

    from ..adapter import adapter_for

    try:
        scenario = adapter_for(cls.key).default_scenario()
    except (KeyError, ValueError):
        return None
    return [f.name for f in dataclasses.fields(scenario)]


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
                           scenarios=sub.max_scenarios, input=sub.max_input):
        chooser = built(cls, sub)
        with progress_bar(unit="runs", leave=False) as bar:
            rep = choose(chooser, variants=names(sub.variant, "--variant"), method=sub.method,
                         progress=bar)
    if args.json or sub.json:
        return rep.as_dict(curves=sub.curves)
    print(rep.text())
    return None


def built(cls, sub):
    """The chooser ``cls`` of the parsed command line ``sub``: the declared inputs its
    options give, and those its ``--scenario`` file gives as fields (the fields its paper's
    scenario has not; an option given overrides the file's), each checked by the declaration
    and named as the user wrote it; the rest of the file is the paper's scenario, a bad field
    named as the file writes it (``--scenario s.json: T=-1``). A stored witness is read as
    its scenario."""
    from ..declare import fields_given, inputs_of, options_given
    from ..scenario import FieldError
    from ..witnesses import as_witness

    written = {i.name: i.flag for i in inputs_of(cls.declared)}
    written["scenario"] = "--scenario"
    values, scenario = {}, None
    if getattr(sub, "scenario", None) is not None:
        data, what = scenario_json(sub.scenario)
        if as_witness(data) is None:
            values, from_file = fields_given(cls.declared, data, what, scenario_fields(cls))
            written.update(from_file)
        try:
            scenario = scenario_from(cls.key, data, what)[0]
        except (FieldError, UsageError):
            raise
        except ValueError as e:
            raise FieldError(f"{what}: {e}") from None
    given, by_option = options_given(cls.declared, sub)
    values.update(given)
    written.update(by_option)
    return cls.from_inputs(values, scenario=scenario, written=written)


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

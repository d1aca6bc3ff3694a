"""A chooser's inputs, declared once: the command-line options, the scenario-file fields and
their validation are generated from the declaration (as click's decorated parameters,
Hydra's structured configs and scikit-learn's ``_parameter_constraints`` do).

An :class:`Input` states one input: its name (the chooser's keyword, and the field of a
scenario file), its type, range, unit, help and default, whether it takes a list (``many``)
and whether it is a knob (one value fixes it, several are the grid the search compares). A
:class:`Group` gathers inputs that build one object together (the problem a chooser trains
on, ``verify.named_problem.problem_inputs``). ``fedbound choose NAME`` then

- adds one option per input (:func:`add_options`: ``--name``, its help from the
  declaration) and reads the options given (:func:`options_given`), each text parsed and
  checked, a bad one refused naming the option (``--alpha=-1 must lie in (0, inf)``);
- reads the inputs a ``--scenario`` file gives as fields (:func:`fields_given`), each checked
  by the same rule and named as the file writes it (``--scenario s.json: alpha=-1 ...``);
  an option given overrides the file's field;
- builds the chooser from the checked values (``verify.choose.Chooser.from_inputs``), which
  validates them once more by the declaration when it is called from Python, named by the
  keywords.

Every message names the input as the user wrote it (:data:`Written`), never rewritten after
the fact.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .scenario import FieldError, _short, require_float, require_int

#: how messages name each input: the option (``--alpha``), the scenario file's field
#: (``--scenario s.json: alpha``) or, from Python, the keyword (``alpha``)
Written = Mapping[str, str]
KINDS = (float, int, str)
#: the smallest step a chooser takes: the smallest normal float (below it a step is round-off,
#: and a bound's 1/step overflows)
SMALLEST_STEP = sys.float_info.min


@dataclass(frozen=True)
class Input:
    """One input of a chooser.

    ``name``: the chooser's keyword and the scenario file's field; ``kind``: ``float``,
    ``int`` or ``str``; ``help``: what it is (one phrase); ``default``: its value when not
    given (None: not given; the chooser's own rule, which ``help`` then states); ``low``,
    ``high`` (``low_open``, ``high_open``: excluded): the range of a number; ``unit``: the
    unit of a number; ``choices``: the values a string may take; ``many``: a list (comma-
    separated on the command line, a JSON list in a file), of exactly ``length`` entries if
    given; ``knob``: a knob of the search (one value fixes it, several are its grid: implies
    ``many``); ``exact``: a number given as text keeps its text (a decimal read exactly, as
    the delay model's fractions); ``option``: the command-line option (default ``--name``,
    underscores as hyphens); ``metavar``: the option's placeholder in the help."""

    name: str
    kind: type = float
    help: str = ""
    default: Any = None
    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False
    unit: str = ""
    choices: tuple[str, ...] = ()
    many: bool = False
    length: int | None = None
    knob: bool = False
    exact: bool = False
    option: str = ""
    metavar: str = ""

    def __post_init__(self):
        if not self.name.isidentifier():
            raise ValueError(f"Input {self.name!r}: the name must be a Python identifier")
        if self.kind not in KINDS:
            raise ValueError(f"Input {self.name}: kind={self.kind!r} must be float, int or str")
        if self.choices and self.kind is not str:
            raise ValueError(f"Input {self.name}: choices are for kind=str")
        if self.knob:
            object.__setattr__(self, "many", True)
        if self.default is not None:
            self.check(self.default, f"Input {self.name}: default")

    @property
    def flag(self) -> str:
        """The command-line option."""
        return self.option or "--" + self.name.replace("_", "-")

    def rule(self) -> str:
        """The rule a value obeys, as text ("a number in (0, inf)", "one of a, b")."""
        if self.kind is str:
            return f"one of {', '.join(self.choices)}" if self.choices else "a string"
        what = "an integer" if self.kind is int else "a number"
        if self.low == -math.inf and self.high == math.inf:
            return what
        if self.kind is int and self.high == math.inf:
            return f"{what} >= {self.low + (1 if self.low_open else 0):g}"
        lo = "(" if self.low_open or self.low == -math.inf else "["
        hi = ")" if self.high_open or self.high == math.inf else "]"
        return f"{what} in {lo}{self.low:g}, {self.high:g}{hi}"

    def help_text(self) -> str:
        """The option's help: what it is, its unit, the rule of its values and its default."""
        parts = [self.help] if self.help else []
        if self.unit:
            parts.append(f"in {self.unit}")
        many = (f"{self.length} comma-separated values" if self.length else
                "one value (fixed) or comma-separated values (the grid compared)" if self.knob
                else "one value or comma-separated values" if self.many else "")
        rule = self.rule()
        parts.append(f"{many}, each {rule}" if many else rule)
        if self.default is not None:
            default = ",".join(map(str, self.default)) if isinstance(self.default, (list, tuple)) \
                else self.default
            parts.append(f"default {default}")
        return "; ".join(parts)

    # ------------------------------------------------------------------ reading

    def parse(self, text: str, name: str):
        """The value of the option's ``text`` (what the command line gave), checked
        (:meth:`check`); FieldError naming ``name`` for text that is not a value."""
        if not self.many:
            return self.check(self._scalar(text, name), name)
        entries = text.split(",")
        try:
            values = [self._scalar(x, name, strict=True) for x in entries]
        except _NotAValue:
            noun = "names" if self.kind is str else "numbers"
            raise FieldError(f"{name} must be comma-separated {noun}, got {text!r}") from None
        return self.check(values, name)

    def _scalar(self, text: str, name: str, strict: bool = False):
        if self.kind is str:
            value = text.strip()
            if strict and not value:
                raise _NotAValue
            return value
        try:
            value = (int if self.kind is int else float)(text)
        except ValueError:
            if strict:
                raise _NotAValue from None
            if self.kind is int:  # "1e9", "4.0": require_int says what to write instead
                try:
                    number = float(text)
                except ValueError:
                    number = None
                if number is not None:
                    return number
            what = "an integer" if self.kind is int else "a number"
            raise FieldError(f"{name}={text.strip()!r} must be {what}") from None
        return text.strip() if self.exact else value

    def check(self, value, name: str):
        """``value`` (a scalar, or a list for ``many``) checked by the declaration, or the
        default for None; FieldError naming ``name`` (and ``name[i]`` for an entry of a
        list) otherwise. A list input given one value gets a list of one."""
        if value is None:
            return None if self.default is None else self.check(self.default, name)
        if isinstance(value, np.ndarray):
            value = value.tolist()
        if not self.many:
            if isinstance(value, (list, tuple)):
                raise FieldError(f"{name}={_short(value)} must be {self.rule()}, not a list")
            return self._check_one(value, name)
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        if not values:
            raise FieldError(f"{name}: give at least one value")
        if self.length is not None and len(values) != self.length:
            raise FieldError(f"{name} has {len(values)} entries, needs {self.length}"
                             + (f": {self.metavar}" if self.metavar else ""))
        one = len(values) == 1 and self.length is None
        return [self._check_one(v, name if one else f"{name}[{i}]") for i, v in enumerate(values)]

    def _check_one(self, value, name: str):
        try:
            if self.kind is str:
                if not isinstance(value, str):
                    raise ValueError(f"{name}={_short(value)} must be a string")
                if self.choices and value not in self.choices:
                    raise ValueError(f"{name}={value!r} must be one of {', '.join(self.choices)}")
                return value
            if self.kind is int:
                low = -(2**63) if self.low == -math.inf else int(math.floor(self.low)) + self.low_open
                high = 2**63 - 1 if self.high == math.inf else int(math.ceil(self.high)) - self.high_open
                return require_int(name, value, minimum=low, maximum=high)
            number = _number(value) if self.exact and isinstance(value, str) else value
            checked = require_float(name, number, low=self.low, high=self.high,
                                    low_open=self.low_open, high_open=self.high_open)
            return value if self.exact and isinstance(value, str) else checked
        except FieldError:
            raise
        except ValueError as e:
            raise FieldError(str(e)) from None


class _NotAValue(Exception):
    """An entry of a comma-separated option that is no value."""


def _number(text: str):
    """The number a text holds (the text itself where it holds none)."""
    try:
        return float(text)
    except ValueError:
        return text


@dataclass(frozen=True)
class Group:
    """Inputs read together into one keyword ``name`` of the chooser: ``build(values,
    written)`` makes the object from the group's values given (a dict, perhaps empty) and
    the names as written (None: nothing given). ``title`` and ``description`` head its
    options in ``--help``; ``replaces``: a field of the paper's scenario that the group
    stands for (a scenario file giving both is refused)."""

    name: str
    inputs: tuple[Input, ...]
    build: Callable[[dict[str, Any], Written], Any]
    title: str = ""
    description: str = ""
    replaces: str = ""


Declared = Sequence[Input | Group]


#: the input every chooser that runs simulations declares: where they run
DEVICE = Input("device", str, "where the simulations run: cpu, cuda, cuda:1, ... (the random draws "
                              "are made on the CPU and moved: the same draws on every device)",
               default="cpu")


def inputs_of(declared: Declared) -> Iterator[Input]:
    """Every input of a declaration, those of its groups included, in order."""
    for item in declared:
        yield from (item.inputs if isinstance(item, Group) else (item,))


def checked_declaration(declared: Declared, reserved: Sequence[str] = ()) -> None:
    """ValueError unless every input has its own name and option, none of them ``reserved``
    (the options every chooser has)."""
    names, flags = set(), set()
    for item in declared:
        if not isinstance(item, (Input, Group)):
            raise ValueError(f"a declaration holds Inputs and Groups, got {item!r}")
    for inp in inputs_of(declared):
        for seen, key in ((names, inp.name), (flags, inp.flag)):
            if key in seen or key in reserved or key.lstrip("-") in reserved:
                raise ValueError(f"input {inp.name}: {key!r} is declared twice or reserved")
            seen.add(key)


def assemble(declared: Declared, values: Mapping[str, Any], written: Written) -> dict[str, Any]:
    """The chooser's keywords: ``values`` by input, a group's gathered into its object
    (``Group.build``: None when none of its inputs is given)."""
    out = {k: v for k, v in values.items()}
    for item in declared:
        if isinstance(item, Group):
            mine = {i.name: out.pop(i.name) for i in item.inputs if out.get(i.name) is not None}
            for i in item.inputs:
                out.pop(i.name, None)
            out[item.name] = item.build(mine, written)
    return out


# ---------------------------------------------------------------------- the command line


def add_options(parser, declared: Declared) -> None:
    """One option per input (its help from the declaration, its text read by
    :func:`options_given`); a group's in an argument group of its own."""
    def add(target, inp: Input) -> None:
        metavar = inp.metavar or ("{" + ",".join(inp.choices) + "}" if inp.choices else None)
        target.add_argument(inp.flag, dest=inp.name, metavar=metavar, help=inp.help_text())

    for item in declared:
        if isinstance(item, Group):
            g = parser.add_argument_group(item.title or item.name, item.description or None)
            for inp in item.inputs:
                add(g, inp)
        else:
            add(parser, item)


def options_given(declared: Declared, args) -> tuple[dict[str, Any], dict[str, str]]:
    """The inputs the parsed command line ``args`` gives, parsed and checked, and how each is
    written (its option)."""
    values, written = {}, {}
    for inp in inputs_of(declared):
        text = getattr(args, inp.name, None)
        if text is not None:
            values[inp.name] = inp.parse(text, inp.flag)
            written[inp.name] = inp.flag
    return values, written


def fields_given(declared: Declared, data: dict[str, Any], what: str,
                 scenario_fields: Sequence[str]) -> tuple[dict[str, Any], dict[str, str]]:
    """The inputs a scenario file gives as fields of its JSON object ``data`` (removed from
    it; ``what`` names the file, ``--scenario s.json``), each checked and named as the file
    writes it (``--scenario s.json: alpha``). A field of the paper's scenario
    (``scenario_fields``) stays the scenario's, even where an input has its name; a file
    that gives a group's fields and the scenario field the group replaces is refused."""
    values, written = {}, {}
    for item in declared:
        if isinstance(item, Group) and item.replaces and item.replaces in data and any(
                i.name in data for i in item.inputs if i.name not in scenario_fields):
            given = next(i.name for i in item.inputs if i.name in data)
            raise FieldError(f"{what}: {given} and {what}: {item.replaces} both name the "
                             f"{item.replaces}: give one")
    for inp in inputs_of(declared):
        if inp.name in data and inp.name not in scenario_fields:
            name = f"{what}: {inp.name}"
            values[inp.name] = inp.check(data.pop(inp.name), name)
            written[inp.name] = name
    return values, written


def file_fields(declared: Declared, scenario_fields: Sequence[str]) -> list[str]:
    """The inputs a scenario file may give as fields (those the paper's scenario has not)."""
    return [i.name for i in inputs_of(declared) if i.name not in scenario_fields]

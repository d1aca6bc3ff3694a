"""A problem named on the command line: a bundled data set, a model and a split of the data
across the clients (``sim.federated.federated_problem``), for the commands that run the
user's own problem (a chooser's ``--data --model --split --batch --hidden``).

:func:`add_problem_arguments` adds the options; :meth:`NamedProblem.from_arguments` reads
them back (None when ``--data`` is not given: the command's default problem), each bad value
refused in one line naming the option, the value and the rule; :meth:`NamedProblem.build`
checks the problem's footprint against the resource limits (``verify.limits``) from the
sizes alone, then builds it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import limits
from .inputs import require_data
from .limits import count_text as _count
from .scenario import FieldError, _short, comma_separated, require_int

#: the data sets, the models and the splits the options take (``sim.federated``'s; written
#: here so that ``--help`` imports no torch)
DATASETS = ("digits", "breast_cancer", "mnist", "cifar10")
MODELS = ("logistic", "mlp", "cnn")
SPLITS = "iid, shards, dirichlet:BETA, fedml:BETA, labels:K or group_labels"
#: the full-gradient steps the calibrated model takes on the whole data (``sim.estimate``)
ESTIMATE_STEPS = 300
#: the fields of a scenario file that name the problem, and their options
FIELDS = {"data": "--data", "data_dir": "--data-dir", "model": "--model", "split": "--split",
          "batch": "--batch", "hidden": "--hidden"}


def add_problem_arguments(p, *, clients: str) -> None:
    """Add ``--data``, ``--data-dir``, ``--model``, ``--split``, ``--batch`` and ``--hidden``
    to the parser ``p``; ``clients`` says where the clients and groups come from (the
    command's option, for the help)."""
    g = p.add_argument_group(
        "your problem (without --data: the command's default one)",
        textwrap.fill(f"--data names your problem: the model --model trained on the data set "
                      f"--data, its samples spread by --split over the clients ({clients}); "
                      "sim.federated.federated_problem", 79))
    g.add_argument("--data", choices=DATASETS,
                   help="the data set: digits (8x8 images, 10 classes) and breast_cancer (30 "
                        "features, 2 classes) come with fedbound[data]; mnist and cifar10 are "
                        "read from --data-dir")
    g.add_argument("--data-dir", metavar="DIR", help="the directory of the MNIST or CIFAR-10 files")
    g.add_argument("--model", choices=MODELS,
                   help="logistic (the default: logistic regression, multinomial beyond 2 "
                        "classes), mlp (tanh hidden layers of --hidden) or cnn (two 3x3 "
                        "convolutions, image data only)")
    g.add_argument("--split", metavar="SPLIT",
                   help="how the data are spread over the clients: iid (the default: every "
                        "client samples the whole data set), shards (disjoint random shards), "
                        "dirichlet:BETA (Dirichlet(BETA) class proportions per client, BETA > 0; "
                        "small BETA: few classes each), fedml:BETA (the same, balanced as "
                        "FedML's), labels:K (K classes per client) or group_labels (disjoint "
                        "class sets per group)")
    g.add_argument("--batch", type=int, metavar="B", help="every client's mini-batch (default 1)")
    g.add_argument("--hidden", metavar="W,...", help="--model mlp: the widths of its hidden layers, comma-"
                                    "separated (default 32)")


def _given(args, name: str):
    return getattr(args, name.lstrip("-").replace("-", "_"), None)


def take_file_fields(data: dict[str, Any], args, choices: Mapping[str, Sequence[str] | None],
                     what: str) -> None:
    """Move the fields of a scenario file that name the problem (FIELDS: ``data``,
    ``model``, ``split``, ``batch``, ``hidden``, ``data_dir``) out of ``data``, the file's
    JSON object, into the parsed options ``args``: those in ``choices`` (field -> the
    choices of the command's option, None for any value), each checked as its option is and
    named as the file writes it (``what: field``, e.g. ``--scenario s.json: batch``); an
    option given on the command line overrides the file's field. ``args.problem_names``
    records the names for :meth:`NamedProblem.from_arguments`. A file that names its
    problem both ways (``data`` and ``problem``) is refused."""
    names = dict(getattr(args, "problem_names", {}))
    if "data" in data and "data" in choices and "problem" in data:
        raise FieldError(f"{what}: data and {what}: problem both name the problem: give one")
    for key, option in FIELDS.items():
        if key not in data or key not in choices:
            continue
        value, name = data.pop(key), f"{what}: {key}"
        if key == "batch":
            value = _checked(require_int, name, value)
        elif key == "hidden":
            widths = value if isinstance(value, list) else [value]
            value = ",".join(str(_checked(require_int, f"{name}[{i}]" if isinstance(value, list)
                                          else name, w)) for i, w in enumerate(widths))
        elif not isinstance(value, str):
            raise FieldError(f"{name}={_short(value)} must be a string")
        elif choices[key] is not None and value not in choices[key]:
            raise FieldError(f"{name}={value!r} must be one of {', '.join(choices[key])}")
        if _given(args, option) is None:
            setattr(args, key, value)
            names[option] = name
    args.problem_names = names


def _checked(check, name: str, value):
    try:
        return check(name, value)
    except ValueError as e:
        raise FieldError(str(e)) from None


@dataclass(frozen=True)
class NamedProblem:
    """The problem the options name: ``data``, ``model``, ``split`` (as written, e.g.
    ``"dirichlet:0.5"``), ``batch``, ``hidden`` (the MLP's widths) and ``data_dir``;
    ``names``: how messages name each option (its field in a scenario file, for one read
    from there; default the option)."""

    data: str
    model: str = "logistic"
    split: str = "iid"
    batch: int = 1
    hidden: tuple[int, ...] = (32,)
    data_dir: str | None = None
    names: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def _n(self, option: str) -> str:
        return self.names.get(option, option)

    @classmethod
    def from_arguments(cls, args) -> NamedProblem | None:
        """The problem of the parsed options, None without ``--data``; FieldError naming the
        option (or the scenario file's field it came from, ``args.problem_names``) for a
        value its rule refuses (checked before any data are read)."""
        from fedbound.sim.federated import IMAGES, parse_split

        names = dict(getattr(args, "problem_names", {}))

        def n(option: str) -> str:
            return names.get(option, option)

        if args.data is None:
            extra = [o for o in ("--model", "--split", "--batch", "--hidden", "--data-dir")
                     if _given(args, o) is not None]
            if extra:
                raise FieldError(f"{n(extra[0])}: needs --data (without it the problem is the "
                                 "command's default one)")
            return None
        model = args.model or "logistic"
        if model == "cnn" and args.data not in IMAGES:
            raise FieldError(f"{n('--model')}=cnn needs image data: {n('--data')}={args.data} is "
                             f"not one of {', '.join(IMAGES)}")
        if args.data in ("mnist", "cifar10") and args.data_dir is None:
            raise FieldError(f"{n('--data')}={args.data} is read from files: give --data-dir, the "
                             "directory that holds them")
        split = "iid" if args.split is None else args.split.strip()
        try:
            parse_split(split)
        except ValueError as e:  # "split=...: the rule"
            raise FieldError(f"{n('--split')}{str(e).removeprefix('split')}") from None
        batch = 1 if args.batch is None else int(args.batch)
        if batch < 1:
            raise FieldError(f"{n('--batch')}={batch} must be an integer >= 1")
        try:
            hidden = comma_separated(args.hidden, n("--hidden"), int)
        except ValueError as e:
            raise FieldError(str(e)) from None
        if hidden is not None and model != "mlp":
            raise FieldError(f"{n('--hidden')}: only with --model mlp (the model is {model})")
        for i, h in enumerate(hidden or ()):
            if h < 1:
                raise FieldError(f"{n('--hidden')}[{i}]={h} must be an integer >= 1")
        return cls(args.data, model, split, batch, tuple(hidden or (32,)), args.data_dir, names)

    def as_dict(self, seed: int) -> dict[str, Any]:
        """The problem as JSON values (what a report's ``problem`` field holds)."""
        out = {"data": self.data, "model": self.model, "split": self.split, "batch": self.batch}
        if self.model == "mlp":
            out["hidden"] = list(self.hidden)
        if self.data_dir is not None:
            out["data_dir"] = self.data_dir
        out["seed"] = seed
        return out

    def build(self, sizes: Sequence[int], seed: int, what: str, *, groups: str = "--sizes"):
        """``sim.federated.federated_problem`` of this problem over the clients of groups of
        ``sizes`` (a ``Federation``: the problem and x_1), after checking that the split can
        be drawn (``groups`` names the option of the groups in messages) and that the
        problem's parameters, data and estimation fit the resource limits (``what`` names
        the command)."""
        from fedbound.sim.federated import dataset, federated_problem, parameter_count, parse_split

        try:
            require_data(self.data, self.data_dir, what, self._n("--data-dir"))  # headers first
            data = dataset(self.data, self.data_dir)
        except FileNotFoundError as e:
            raise FieldError(f"{self._n('--data-dir')}={self.data_dir}: {e}") from None
        split = parse_split(self.split)
        if isinstance(split, tuple) and split[0] == "labels" and split[1] > data.classes:
            raise FieldError(f"{self._n('--split')}={self.split}: {split[1]} classes per client, "
                             f"but {self._n('--data')}={self.data} has {data.classes} classes")
        if split == "group_labels" and len(sizes) > data.classes:
            raise FieldError(f"{self._n('--split')}=group_labels needs a class per group: {groups} "
                             f"gives {len(sizes)} groups, {self._n('--data')}={self.data} has "
                             f"{data.classes} classes")
        n, features = data.features.shape
        dim = parameter_count(self.model, data, self.data, self.hidden)
        model = f"--model {self.model}" + (f" --hidden {','.join(map(str, self.hidden))}"
                                           if self.model == "mlp" else "")
        limits.require_runs(what, {f"the problem ({model} on --data {self.data})": limits.Footprint.of(
            {f"parameters={_count(dim)} x 4 copies of 8 B": 32.0 * dim,
             f"samples={_count(n)} x features={_count(features)} x 3 copies of 8 B": 24.0 * n * features},
            {f"{ESTIMATE_STEPS} gradient steps x samples={_count(n)} x parameters={_count(dim)} (the "
             "calibrated model's reference minimiser)": ESTIMATE_STEPS * 6.0 * n * dim})})
        try:
            return federated_problem(data, self.model, split, tuple(sizes), seed=seed,
                                     batch=self.batch, hidden=self.hidden)
        except ValueError as e:
            raise FieldError(f"{self._n('--split')}={self.split} over {groups} "
                             f"{','.join(map(str, sizes))}: "
                             f"{e}") from None

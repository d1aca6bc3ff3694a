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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from . import limits
from .limits import count_text as _n
from .scenario import comma_separated

#: the data sets, the models and the splits the options take (``sim.federated``'s; written
#: here so that ``--help`` imports no torch)
DATASETS = ("digits", "breast_cancer", "mnist", "cifar10")
MODELS = ("logistic", "mlp", "cnn")
SPLITS = "iid, shards, dirichlet:BETA, fedml:BETA, labels:K or group_labels"
#: the full-gradient steps the calibrated model takes on the whole data (``sim.estimate``)
ESTIMATE_STEPS = 300


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


@dataclass(frozen=True)
class NamedProblem:
    """The problem the options name: ``data``, ``model``, ``split`` (as written, e.g.
    ``"dirichlet:0.5"``), ``batch``, ``hidden`` (the MLP's widths) and ``data_dir``."""

    data: str
    model: str = "logistic"
    split: str = "iid"
    batch: int = 1
    hidden: tuple[int, ...] = (32,)
    data_dir: str | None = None

    @classmethod
    def from_arguments(cls, args) -> NamedProblem | None:
        """The problem of the parsed options, None without ``--data``; ValueError naming the
        option for a value its rule refuses (checked before any data are read)."""
        from fedbound.sim.federated import IMAGES, parse_split

        if args.data is None:
            extra = [o for o in ("--model", "--split", "--batch", "--hidden", "--data-dir")
                     if _given(args, o) is not None]
            if extra:
                raise ValueError(f"{extra[0]}: needs --data (without it the problem is the "
                                 "command's default one)")
            return None
        model = args.model or "logistic"
        if model == "cnn" and args.data not in IMAGES:
            raise ValueError(f"--model=cnn needs image data: --data={args.data} is not one of "
                             f"{', '.join(IMAGES)}")
        if args.data in ("mnist", "cifar10") and args.data_dir is None:
            raise ValueError(f"--data={args.data} is read from files: give --data-dir, the "
                             "directory that holds them")
        split = "iid" if args.split is None else args.split.strip()
        try:
            parse_split(split)
        except ValueError as e:
            raise ValueError(f"--{e}") from None
        batch = 1 if args.batch is None else args.batch
        if batch < 1:
            raise ValueError(f"--batch={batch} must be an integer >= 1")
        hidden = comma_separated(args.hidden, "--hidden", int)
        if hidden is not None and model != "mlp":
            raise ValueError(f"--hidden: only with --model mlp (the model is {model})")
        for i, h in enumerate(hidden or ()):
            if h < 1:
                raise ValueError(f"--hidden[{i}]={h} must be an integer >= 1")
        if hidden == []:
            raise ValueError("--hidden: give at least one width")
        return cls(args.data, model, split, batch, tuple(hidden or (32,)), args.data_dir)

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
            data = dataset(self.data, self.data_dir)
        except FileNotFoundError as e:
            raise ValueError(f"--data-dir={self.data_dir}: {e}") from None
        split = parse_split(self.split)
        if isinstance(split, tuple) and split[0] == "labels" and split[1] > data.classes:
            raise ValueError(f"--split={self.split}: {split[1]} classes per client, but --data="
                             f"{self.data} has {data.classes} classes")
        if split == "group_labels" and len(sizes) > data.classes:
            raise ValueError(f"--split=group_labels needs a class per group: {groups} gives "
                             f"{len(sizes)} groups, --data={self.data} has {data.classes} classes")
        n, features = data.features.shape
        dim = parameter_count(self.model, data, self.data, self.hidden)
        model = f"--model {self.model}" + (f" --hidden {','.join(map(str, self.hidden))}"
                                           if self.model == "mlp" else "")
        limits.require_runs(what, {f"the problem ({model} on --data {self.data})": limits.Footprint.of(
            {f"parameters={_n(dim)} x 4 copies of 8 B": 32.0 * dim,
             f"samples={_n(n)} x features={_n(features)} x 3 copies of 8 B": 24.0 * n * features},
            {f"{ESTIMATE_STEPS} gradient steps x samples={_n(n)} x parameters={_n(dim)} (the "
             "calibrated model's reference minimiser)": ESTIMATE_STEPS * 6.0 * n * dim})})
        try:
            return federated_problem(data, self.model, split, tuple(sizes), seed=seed,
                                     batch=self.batch, hidden=self.hidden)
        except ValueError as e:
            raise ValueError(f"--split={self.split} over {groups} {','.join(map(str, sizes))}: "
                             f"{e}") from None

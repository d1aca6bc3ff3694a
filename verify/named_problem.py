"""A problem named on the command line: a bundled data set, a model and a split of the data
across the clients (``sim.federated.federated_problem``), for the choosers that run the
user's own problem (``--data --model --split --batch --hidden --data-dir``).

:func:`problem_inputs` declares those inputs (``verify.declare``: the options, the scenario
file's fields ``data``, ``model``, ...) as a group that builds a :class:`NamedProblem`
(:meth:`NamedProblem.from_values`: None without ``data``, the command's default problem),
each bad value refused in one line naming the option or the file's field, the value and the
rule; :meth:`NamedProblem.build` checks the problem's footprint against the resource limits
(``verify.limits``) from the sizes alone, then builds it.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import limits
from .declare import Group, Input, Written
from .inputs import require_data
from .limits import count_text as _count
from .scenario import FieldError

#: the data sets, the models and the splits the options take (``sim.federated``'s; written
#: here so that ``--help`` imports no torch)
DATASETS = ("digits", "breast_cancer", "mnist", "cifar10")
MODELS = ("logistic", "mlp", "cnn")
SPLITS = "iid, shards, dirichlet:BETA, fedml:BETA, labels:K or group_labels"
#: the full-gradient steps the calibrated model takes on the whole data (``sim.estimate``)
ESTIMATE_STEPS = 300
#: per model, the samples the calibrated model's reference run and Hessian take (a subsample
#: of the data, ``sim.estimate.quadratic_model``) where a full gradient is costly: the CNN's
#: convolutions in float64 cost about 20 times the MLP's
SUBSAMPLE = {"cnn": 256}


def problem_inputs(*, clients: str) -> Group:
    """The inputs that name the problem (``data``, ``data_dir``, ``model``, ``split``,
    ``batch``, ``hidden``), gathered into the chooser's keyword ``named`` (a
    :class:`NamedProblem`, or None without ``data``); ``clients`` says where the clients and
    groups come from (the command's option, for the help). A scenario file may give them as
    fields instead of its ``problem``, not beside it."""
    return Group("named", (
        Input("data", str, "the data set: digits (8x8 images, 10 classes) and breast_cancer (30 "
                           "features, 2 classes) come with fedbound[data]; mnist and cifar10 are "
                           "read from --data-dir", choices=DATASETS),
        Input("data_dir", str, "the directory of the MNIST or CIFAR-10 files", metavar="DIR"),
        Input("model", str, "logistic (the default: logistic regression, multinomial beyond 2 "
                            "classes), mlp (tanh hidden layers of --hidden) or cnn (two 3x3 "
                            "convolutions, image data only)", choices=MODELS),
        Input("split", str, "how the data are spread over the clients: iid (the default: every "
                            "client samples the whole data set), shards (disjoint random shards), "
                            "dirichlet:BETA (Dirichlet(BETA) class proportions per client, BETA > "
                            "0; small BETA: few classes each), fedml:BETA (the same, balanced as "
                            "FedML's), labels:K (K classes per client) or group_labels (disjoint "
                            "class sets per group)", metavar="SPLIT"),
        Input("batch", int, "every client's mini-batch (default 1)", low=1, metavar="B"),
        Input("hidden", int, "--model mlp: the widths of its hidden layers (default 32)", low=1,
              many=True, metavar="W,..."),
    ), NamedProblem.from_values, title="your problem (without --data: the command's default one)",
        description=textwrap.fill(
            f"--data names your problem: the model --model trained on the data set --data, its "
            f"samples spread by --split over the clients ({clients}); "
            "sim.federated.federated_problem", 79), replaces="problem")


@dataclass(frozen=True)
class NamedProblem:
    """The problem the options name: ``data``, ``model``, ``split`` (as written, e.g.
    ``"dirichlet:0.5"``), ``batch``, ``hidden`` (the MLP's widths) and ``data_dir``;
    ``names``: how messages name each input (its option, or its field in a scenario file
    for one read from there; default the input's name)."""

    data: str
    model: str = "logistic"
    split: str = "iid"
    batch: int = 1
    hidden: tuple[int, ...] = (32,)
    data_dir: str | None = None
    names: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def _n(self, name: str) -> str:
        return self.names.get(name, name)

    @classmethod
    def from_values(cls, values: Mapping[str, Any], written: Written) -> NamedProblem | None:
        """The problem of the checked inputs ``values`` of :func:`problem_inputs` (None
        without ``data``); FieldError naming the input as ``written`` (its option, or the
        scenario file's field it came from) where the inputs do not go together (checked
        before any data are read)."""
        from fedbound.sim.federated import IMAGES, parse_split

        names = {k: written.get(k, k) for k in ("data", "data_dir", "model", "split", "batch",
                                                  "hidden")}

        def n(name: str) -> str:
            return names[name]

        data = values.get("data")
        if data is None:
            extra = [k for k in ("model", "split", "batch", "hidden", "data_dir") if k in values]
            if extra:
                raise FieldError(f"{n(extra[0])}: needs {n('data')} (without it the problem is the "
                                 "command's default one)")
            return None
        model = values.get("model") or "logistic"
        if model == "cnn" and data not in IMAGES:
            raise FieldError(f"{n('model')}=cnn needs image data: {n('data')}={data} is "
                             f"not one of {', '.join(IMAGES)}")
        data_dir = values.get("data_dir")
        if data in ("mnist", "cifar10") and data_dir is None:
            raise FieldError(f"{n('data')}={data} is read from files: give {n('data_dir')}, the "
                             "directory that holds them")
        split = (values.get("split") or "iid").strip()
        try:
            parse_split(split)
        except ValueError as e:  # "split=...: the rule"
            raise FieldError(f"{n('split')}{str(e).removeprefix('split')}") from None
        hidden = values.get("hidden")
        if hidden is not None and model != "mlp":
            raise FieldError(f"{n('hidden')}: only with {n('model')} mlp (the model is {model})")
        return cls(data, model, split, values.get("batch") or 1, tuple(hidden or (32,)), data_dir,
                   names)

    @property
    def subsample(self) -> int | None:
        """The samples the calibrated model estimates on (:data:`SUBSAMPLE`; None: all)."""
        return SUBSAMPLE.get(self.model)

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
            require_data(self.data, self.data_dir, what, self._n("data_dir"))  # headers first
            data = dataset(self.data, self.data_dir)
        except FileNotFoundError as e:
            raise FieldError(f"{self._n('data_dir')}={self.data_dir}: {e}") from None
        split = parse_split(self.split)
        if isinstance(split, tuple) and split[0] == "labels" and split[1] > data.classes:
            raise FieldError(f"{self._n('split')}={self.split}: {split[1]} classes per client, "
                             f"but {self._n('data')}={self.data} has {data.classes} classes")
        if split == "group_labels" and len(sizes) > data.classes:
            raise FieldError(f"{self._n('split')}=group_labels needs a class per group: {groups} "
                             f"gives {len(sizes)} groups, {self._n('data')}={self.data} has "
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
            raise FieldError(f"{self._n('split')}={self.split} over {groups} "
                             f"{','.join(map(str, sizes))}: "
                             f"{e}") from None

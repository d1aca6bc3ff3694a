"""A synthetic paper "synth" for the tests of the reproduction engine: experiments whose
outcomes are seeded numpy draws (no simulator), claims that agree, contradict, stay
undecided, depend on a reading, or whose run fails or is too large. Importing it registers
them (``register``); ``unregister`` removes them. Loadable as a plugin (``--plugin
synth_claims`` with this folder on the path)."""

from __future__ import annotations

import numpy as np

from fedbound.verify.api import (
    Claim,
    Curve,
    Experiment,
    Footprint,
    Outcome,
    Reading,
    above,
    between,
    register_claim,
    register_experiment,
    unregister_paper,
)

#: every run of an experiment, in this process: (experiment id, plan)
CALLS: list = []
X = np.arange(0.0, 11.0)


def _curve(label, rng, seeds, level, bound=None):
    y = level * np.exp(-X / 5)[None, :] + rng.normal(0, 0.01, (seeds, X.size))
    return Curve(label, X, y, None if bound is None else np.full(X.size, bound))


def base(plan):
    CALLS.append(("synth.base", plan))
    rng = np.random.default_rng(plan.seed)
    flip = plan.reading == "flipped"
    curves = [_curve("A", rng, plan.seeds, 2.0 if flip else 1.0, bound=3.0),
              _curve("B", rng, plan.seeds, 1.5, bound=4.0),
              _curve("C", rng, plan.seeds, 1.5)]
    return Outcome({c.label: c for c in curves}, "time", "loss", {"rounds A": np.full(plan.seeds, 3.0)},
                   notes=("synthetic",), prediction="the bound is lower for A")


def fails(plan):
    CALLS.append(("synth.fails", plan))
    raise RuntimeError("the synthetic run broke")


def huge(plan):
    CALLS.append(("synth.huge", plan))
    raise AssertionError("a refused run must not start")


def small(plan):
    return Footprint.of({"tiny": 8.0 * plan.seeds}, {"tiny": 10.0 * plan.seeds})


def at_end(outcome, a, b):
    return outcome.at(b, 10) - outcome.at(a, 10)


def register():
    readings = (Reading("as-printed", "the algorithm as printed"),
                Reading("flipped", "a reading under which A is worse"))
    register_experiment(Experiment("synth.base", base, (3, 6), small, readings))
    register_experiment(Experiment("synth.fails", fails, (3, 6), small))
    register_experiment(Experiment(
        "synth.huge", huge, (3, 6), lambda plan: Footprint.of({"x": 1.0}, {"steps": 1e30})))
    register_claim(Claim(
        "synth.fig1.a-lower", "Synth 2024, Fig. 1", "A ends lower than B", {"model": "none"},
        "numpy draws", "synth.base",
        lambda o: [above("loss(B) - loss(A)", at_end(o, "A", "B"), compares=("A", "B"), at=10)],
        primary="as-printed"))
    register_claim(Claim(
        "synth.fig1.b-lower", "Synth 2024, Fig. 1", "B ends lower than A", {"model": "none"},
        "numpy draws", "synth.base",
        lambda o: [above("loss(A) - loss(B)", at_end(o, "B", "A"), compares=("B", "A"), at=10)],
        primary="as-printed"))
    register_claim(Claim(
        "synth.fig2.b-like-c", "Synth 2024, Fig. 2", "B and C end alike", {"model": "none"},
        "numpy draws", "synth.base",
        lambda o: [between("loss(B) - loss(C)", at_end(o, "C", "B"), -0.001, 0.001)],
        curves=("B", "C"), primary="as-printed"))
    register_claim(Claim("synth.fig3.broken", "Synth 2024, Fig. 3", "a run that fails",
                         {}, "none", "synth.fails", lambda o: []))
    register_claim(Claim("synth.fig4.huge", "Synth 2024, Fig. 4", "a run too large to start",
                         {}, "none", "synth.huge", lambda o: []))


def unregister():
    unregister_paper("synth")


register()

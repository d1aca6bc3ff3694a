"""A synthetic paper "synth" for the tests of the reproduction engine: experiments whose
outcomes are seeded numpy draws (no simulator), claims that agree, contradict, stay
undecided, are negligible or fixed by the setting (identical runs, or said so), compare
censored hitting times, depend on a reading, or whose run fails or is too large. Importing it registers
them (``register``); ``unregister`` removes them. Loadable as a plugin (``--plugin
synth_claims`` with this folder on the path)."""

from __future__ import annotations

import os
import time

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
    fixed_by_setting,
    register_claim,
    register_experiment,
    sooner,
    unregister_paper,
)

#: every run of an experiment, in this process: (experiment id, plan)
CALLS: list = []
X = np.arange(0.0, 11.0)


def _curve(label, rng, seeds, level, bound=None):
    y = level * np.exp(-X / 5)[None, :] + rng.normal(0, 0.01, (seeds, X.size))
    return Curve(label, X, y, None if bound is None else np.full(X.size, bound))


def _logged(experiment: str, plan) -> None:
    """Record a run in :data:`CALLS` and, for a test watching another process, in the file
    ``SYNTH_LOG`` names; hang for ten minutes where ``SYNTH_HANG`` names the experiment (a
    run to interrupt)."""
    CALLS.append((experiment, plan))
    if os.environ.get("SYNTH_LOG"):
        with open(os.environ["SYNTH_LOG"], "a") as f:
            f.write(f"{experiment} {plan.reading}\n")
    if os.environ.get("SYNTH_HANG") == experiment:
        time.sleep(600)


def base(plan):
    _logged("synth.base", plan)
    rng = np.random.default_rng(plan.seed)
    flip = plan.reading == "flipped"
    curves = [_curve("A", rng, plan.seeds, 2.0 if flip else 1.0, bound=3.0),
              _curve("B", rng, plan.seeds, 1.5, bound=4.0),
              _curve("C", rng, plan.seeds, 1.5)]
    return Outcome({c.label: c for c in curves}, "time", "loss", {"rounds A": np.full(plan.seeds, 3.0)},
                   notes=("synthetic",), prediction="the bound is lower for A")


def extra(plan):
    """B and C as in :func:`base`, B once more (the same run: a setting that fixes it), and
    hitting times of a target loss, inf where it is not reached within the horizon 10."""
    _logged("synth.extra", plan)
    rng = np.random.default_rng(plan.seed + 1)
    b, c = _curve("B", rng, plan.seeds, 1.5), _curve("C", rng, plan.seeds, 1.5)
    again = Curve("B again", X, b.y)
    reach_a = np.where(np.arange(plan.seeds) % 3 == 2, np.inf, rng.uniform(1.0, 3.0, plan.seeds))
    reach_b = np.where(np.arange(plan.seeds) % 2 == 0, np.inf, rng.uniform(6.0, 9.0, plan.seeds))
    return Outcome({x.label: x for x in (b, c, again)}, "time", "loss",
                   {"reach A": reach_a, "reach B": reach_b})


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


#: the margin of the synthetic orderings (the curves' noise has sd 0.01)
MARGIN = {"margin": 0.01, "source": "the synthetic paper's stated margin"}


def register():
    readings = (Reading("as-printed", "the algorithm as printed"),
                Reading("flipped", "a reading under which A is worse"))
    register_experiment(Experiment("synth.base", base, (3, 6), small, readings))
    register_experiment(Experiment("synth.fails", fails, (3, 6), small))
    register_experiment(Experiment("synth.extra", extra, (3, 6), small))
    register_experiment(Experiment(
        "synth.huge", huge, (3, 6), lambda plan: Footprint.of({"x": 1.0}, {"steps": 1e30})))
    register_claim(Claim(
        "synth.fig1.a-lower", "Synth 2024, Fig. 1", "A ends lower than B", {"model": "none"},
        "numpy draws", "synth.base",
        lambda o: [above("loss(B) - loss(A)", at_end(o, "A", "B"), **MARGIN, compares=("A", "B"),
                         at=10)],
        primary="as-printed"))
    register_claim(Claim(
        "synth.fig1.b-lower", "Synth 2024, Fig. 1", "B ends lower than A", {"model": "none"},
        "numpy draws", "synth.base",
        lambda o: [above("loss(A) - loss(B)", at_end(o, "B", "A"), **MARGIN, compares=("B", "A"),
                         at=10)],
        primary="as-printed"))
    register_claim(Claim(
        "synth.fig2.b-like-c", "Synth 2024, Fig. 2", "B and C end alike", {"model": "none"},
        "numpy draws", "synth.base",
        lambda o: [between("loss(B) - loss(C)", at_end(o, "C", "B"), -0.001, 0.001,
                           source="the synthetic paper's tolerance")],
        curves=("B", "C"), primary="as-printed"))
    register_claim(Claim(
        "synth.fig5.c-below-b", "Synth 2024, Fig. 5", "C ends lower than B", {"model": "none"},
        "numpy draws", "synth.extra",
        lambda o: [above("loss(B) - loss(C)", at_end(o, "C", "B"), margin=0.1,
                         source="a margin far above the curves' gap")], curves=("B", "C")))
    register_claim(Claim(
        "synth.fig6.b-again", "Synth 2024, Fig. 6", "B ends lower than B again",
        {"model": "none"}, "numpy draws", "synth.extra",
        lambda o: [above("loss(B again) - loss(B)", at_end(o, "B", "B again"), **MARGIN)],
        curves=("B", "B again")))
    register_claim(Claim(
        "synth.fig7.stated", "Synth 2024, Fig. 7", "A runs 3 rounds", {"model": "none"},
        "numpy draws", "synth.extra",
        lambda o: [fixed_by_setting("rounds of A", "the schedule runs A for 3 rounds on every "
                                    "seed, whatever training does")]))
    register_claim(Claim(
        "synth.fig8.a-sooner", "Synth 2024, Fig. 8", "A reaches the target sooner than B",
        {"model": "none"}, "numpy draws", "synth.extra",
        lambda o: [sooner("time(B) - time(A) to the target", o.scalars["reach A"],
                          o.scalars["reach B"], horizon=10.0, margin=1.0,
                          source="one time unit")],
        metric="time to the target"))
    register_claim(Claim("synth.fig3.broken", "Synth 2024, Fig. 3", "a run that fails",
                         {}, "none", "synth.fails", lambda o: []))
    register_claim(Claim("synth.fig4.huge", "Synth 2024, Fig. 4", "a run too large to start",
                         {}, "none", "synth.huge", lambda o: []))


def unregister():
    unregister_paper("synth")


register()

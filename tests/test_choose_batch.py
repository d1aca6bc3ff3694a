"""The choosers' simulations as batches (``Chooser.simulate`` of hfl, mllsgd and tdcd): a
stage of n configurations is one simulator call on common random numbers, paired or not; a
configuration's evaluation is the same alone and in a stage, bit for bit; a stage above the
memory or step limit is cut into batches (``verify.limits.fitting_batches``) with the same
numbers, and one configuration above it is refused before anything runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import fedbound.sim.hfl
import fedbound.sim.mllsgd
import fedbound.sim.tdcd
from fedbound.verify import limits
from fedbound.verify.api import ResourceError
from fedbound.verify.papers.hfl.choose import SyncTime
from fedbound.verify.papers.mllsgd.adapters import Theorem1 as MLLSGDTheorem1
from fedbound.verify.papers.mllsgd.choose import TauEta
from fedbound.verify.papers.tdcd.adapters import Theorem1 as TDCDTheorem1
from fedbound.verify.papers.tdcd.choose import QEta

torch.set_num_threads(1)


def hfl_chooser():
    return SyncTime(sizes=[2, 3], delays=[0.01, 0.85, 0.001, 0.085, 4, 2, 0.4, 0.2], T=40.0,
                    L=1.0, G=10.0, sigma=3.0, Delta=10.0)


def mllsgd_chooser():
    return TauEta(scenario=MLLSGDTheorem1.default.replace(K=32))


def tdcd_chooser():  # least squares: bit for bit from 3 replicas on (sim.problems.CommonDraws)
    return QEta(scenario=TDCDTheorem1.default.replace(loss="squared"), t_comm=2.0, Q=(1, 2, 4),
                metric="lhs", replicas=4)


CHOOSERS = {
    "hfl": (hfl_chooser, fedbound.sim.hfl, "run_hfl",
            [{"S": S, "alpha": a} for S in (0.0, 2.0, 6.0) for a in (0.05, 0.3)]),
    "mllsgd": (mllsgd_chooser, fedbound.sim.mllsgd, "run_mllsgd",
               [{"tau": tau, "eta": e} for tau in (1, 2, 4) for e in (0.05, 0.2)]),
    "tdcd": (tdcd_chooser, fedbound.sim.tdcd, "run_tdcd",
             [{"Q": Q, "eta": e} for Q in (1, 2, 4) for e in (0.02, 0.08)]),
}


@pytest.fixture(params=list(CHOOSERS))
def case(request, monkeypatch):
    make, module, name, settings = CHOOSERS[request.param]
    chooser, calls = make(), []  # made first: TDCD's runs its noise floor
    run = getattr(module, name)

    def counted(*args, **kw):
        calls.append(kw)
        return run(*args, **kw)

    monkeypatch.setattr(module, name, counted)
    return chooser, settings, calls


def values(evaluations) -> list[np.ndarray]:
    return [np.asarray(e.values) for e in evaluations]


@pytest.mark.parametrize("paired", [True, False])
def test_a_stage_is_one_simulator_call_and_each_configuration_its_run_alone(case, paired):
    chooser, settings, calls = case
    stage = chooser.simulate(settings, 4, paired=paired)
    assert len(calls) == 1 and [e.settings for e in stage] == settings
    for row, e in zip(settings, stage, strict=True):
        alone = chooser.simulate([row], 4, paired=paired)[0]
        assert np.array_equal(alone.values, e.values)  # bit for bit, inf included
    assert len({tuple(v) for v in values(stage)}) > 1  # the configurations differ


def test_a_block_of_replicas_is_its_own_common_numbers_and_block_0_the_plain_call(case):
    """``simulate(..., block=b)`` (``Chooser.replica_blocks``): block 0 is the call without
    it; block 1 draws other numbers, the same on every call and for a configuration alone
    as in a stage (common random numbers within the block)."""
    chooser, settings, _ = case
    assert chooser.replica_blocks
    plain = values(chooser.simulate(settings, 4, paired=True))
    assert all(np.array_equal(a, b) for a, b in
               zip(plain, values(chooser.simulate(settings, 4, paired=True, block=0)), strict=True))
    one = values(chooser.simulate(settings, 4, paired=True, block=1))
    assert all(np.array_equal(a, b) for a, b in
               zip(one, values(chooser.simulate(settings, 4, paired=True, block=1)), strict=True))
    assert np.array_equal(one[2], chooser.simulate([settings[2]], 4, paired=True, block=1)[0].values)
    assert not any(np.array_equal(a, b) for a, b in zip(plain, one, strict=True))
    assert not np.array_equal(one[0], values(chooser.simulate(settings[:1], 4, paired=True,
                                                              block=2))[0])


def test_a_stage_above_the_memory_limit_is_cut_into_batches_with_the_same_numbers(case):
    chooser, settings, calls = case
    whole = chooser.simulate(settings, 4, paired=True)
    one = max(chooser.footprint(row, 4).bytes for row in settings)
    with limits.configured(memory=str(int(2.5 * one))):
        cut = chooser.simulate(settings, 4, paired=True)
    assert len(calls) - 1 >= 3  # at most two configurations a call
    for a, b in zip(values(whole), values(cut), strict=True):
        assert np.array_equal(a, b)
    with limits.configured(memory=str(int(one / 4))), pytest.raises(ResourceError,
                                                                    match="one batch"):
        chooser.simulate(settings[:1], 4, paired=True)


def test_fitting_batches_cut_in_order_within_both_limits():
    def fp(nbytes, steps=1.0):
        return limits.Footprint(nbytes, steps, "")

    with limits.configured(memory="100", steps="1000"):
        sizes = [fp(40), fp(40), fp(40), fp(10), fp(90), fp(200), fp(5)]
        assert limits.fitting_batches(sizes) == [[0, 1], [2, 3], [4], [5], [6]]
        assert limits.fitting_batches([fp(1, 600), fp(1, 300), fp(1, 300)]) == [[0, 1], [2]]
        assert limits.fitting_batches([]) == []
        assert limits.fitting_batches([fp(float("inf")), fp(1)]) == [[0], [1]]

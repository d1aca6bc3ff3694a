"""Rate checks (verify/rate.py, fedbound rate): the exponent fit against exact power laws, the
published exponent along a sweep, and the corollaries: MLL-SGD's (15) decays at its rate,
AFL's Corollary 2 has no linear speedup in K (rate refuted)."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound import bounds
from fedbound.bounds.core import Rate
from fedbound.verify import check
from fedbound.verify.api import adapter_for
from fedbound.verify.cli import main
from fedbound.verify.rate import declared, fit_exponent, rate


@settings(max_examples=50, deadline=None)
@given(st.floats(-3, 3), st.floats(1e-3, 1e3),
       st.lists(st.floats(1, 1e4), min_size=3, max_size=8, unique=True))
def test_an_exact_power_law_is_fitted_exactly(exponent, c, xs):
    xs = np.array(sorted(xs))
    if np.log(xs[-1] / xs[0]) < 0.1:
        return  # too narrow a range to fit
    slope, (lo, hi) = fit_exponent(xs, c * xs**exponent)
    assert slope == pytest.approx(exponent, abs=1e-9) and hi - lo < 1e-6


def test_noise_widens_the_interval_and_it_covers_the_truth():
    rng = np.random.default_rng(0)
    x = np.geomspace(10, 1e4, 6)
    covered = 0
    for _ in range(200):
        y = x**-0.5 * np.exp(rng.normal(0, 0.05, x.size))
        _, (lo, hi) = fit_exponent(x, y, log_se=np.zeros(x.size))
        covered += lo <= -0.5 <= hi
    assert 0.9 <= covered / 200 <= 0.99  # a 95% interval


def test_the_published_exponent_along_a_sweep_is_the_largest_over_the_terms():
    r = Rate(({"K": -0.5, "T": -0.5}, {"K": 2, "T": -1}, {"tau": 2, "T": -1}), "test")
    assert r.exponents == {"K": -0.5, "T": -0.5}
    assert r.exponent_along({"T": 1}) == -0.5
    assert r.exponent_along({"K": 1}) == 2  # at fixed T the K^2/T term takes over
    assert r.exponent_along({"K": 1, "T": 6}, zero=["tau"]) == -3.5
    assert r.exponent_along({"tau": 1}, zero=["tau", "K"]) == -math.inf
    with pytest.raises(ValueError, match="finite exponents"):
        Rate(({"K": math.inf},), "test")


def test_every_corollary_states_a_rate_and_declares_its_sweeps():
    with_rate = {k for k in bounds.keys() if bounds.get(k).rate is not None}
    assert with_rate == set(declared()) == {"mllsgd.corollary1", "hfl.corollary1", "tdcd.remark5",
                                        "afl.corollary1", "afl.corollary2", "afl.corollary3"}
    assert set(declared()["afl.corollary2"]) == {"T", "K", "m"} and "M" in declared()["afl.corollary3"]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_done_means_mllsgd_corollary1_agrees_with_its_rate(capsys):
    code, out, _ = run(capsys, "rate", "mllsgd.corollary1", "--exact", "--json")
    (r,) = json.loads(out)
    assert code == 0 and r["verdict"] == "agrees" and r["mode"] == "exact"
    assert r["stated"] == -0.5 and r["interval"][0] <= -0.5 + 0.05 and r["interval"][1] >= -0.5 - 0.05
    # the points are the corollary's left-hand side, as fedbound check measures it
    v = check("mllsgd.corollary1", r["scenarios"][0], exact=True)
    assert v.measured_mean == r["lhs"][0] and v.params["K"] == r["x"][0]


def test_done_means_afl_corollary2_has_no_linear_speedup_in_K(capsys):
    code, out, _ = run(capsys, "rate", "afl.corollary2", "--over", "K", "--exact", "--json")
    (r,) = json.loads(out)
    assert code == 1 and r["verdict"] == "contradicts"
    # T grows like K^5.5 along the sweep: the rate's first term decays like K^(-1/2 - 11/4);
    # the sampling variance, like s = sqrt(K/T): K^(1/2 - 11/4)
    assert r["powers"]["T"] == pytest.approx(5.5, abs=0.01) and r["stated"] == pytest.approx(-3.25)
    assert r["exponent"] == pytest.approx(-2.25, abs=0.1) and r["interval"][0] > r["stated"] + 0.5


def test_monte_carlo_rate_of_tdcd_remark5():
    (r,) = rate("tdcd.remark5")
    assert r.mode == "monte-carlo" and r.verdict == "agrees" and r.stated == -0.5
    assert all(lo <= y <= hi for y, (lo, hi) in zip(r.lhs, r.lhs_ci, strict=True))


def test_rate_refuses_what_it_cannot_do(capsys):
    with pytest.raises(ValueError, match="states no rate"):
        rate("mllsgd.theorem1")
    with pytest.raises(ValueError, match="swept over"):
        rate("mllsgd.corollary1", "T")
    with pytest.raises(ValueError, match="at least 3 distinct positive values"):
        rate("mllsgd.corollary1", values=[1024, 4096])
    code, _, err = run(capsys, "rate", "hfl.corollary1", "--exact")
    assert code == 2 and "exact mode is unavailable" in err
    code, _, err = run(capsys, "rate", "afl.corollary2", "--over", "K", "--values", "1,2,x")
    assert code == 2 and "--values" in err
    sweep = declared()["afl.corollary2"]["K"]
    assert sweep.scenario(adapter_for("afl.corollary2"), 2).T == round(256 * 2**5.5)

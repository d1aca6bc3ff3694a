"""The plots draw the numbers that check() and the theorems compute."""

import matplotlib.pyplot as plt
import numpy as np
import pytest

import bounds
from verify import adapter_for, check, default_scenario, plots


def test_mllsgd_figure_draws_the_bound_at_every_whole_hub_period():
    key, s = "mllsgd.theorem1", default_scenario("mllsgd.theorem1")
    ad = adapter_for(key)
    ax = ad.plot(s, exact=True)
    measured, bound = ax.get_lines()
    thm = bounds.get(key)
    params = ad.parameters(s, thm)
    ks = bound.get_xdata()
    assert np.array_equal(ks, np.arange(s.q * s.tau, s.K + 1, s.q * s.tau))
    expected = [thm.evaluate(**{**params, "K": k}) for k in ks]
    np.testing.assert_allclose(bound.get_ydata(), expected, rtol=1e-12)
    # the last point of the running average is the verdict's measurement
    assert measured.get_ydata()[-1] == pytest.approx(check(key, s, exact=True).measured_mean, rel=1e-12)


@pytest.mark.parametrize("field, values, x", [
    ("eta", [1e-3, 2e-3, 4e-3], None),
    ("tau", [1, 2, 4], None),
    ("q", [1, 2, 4], None),
    ("hubs", [2, 3, 5], "zeta"),
])
def test_against_draws_each_verdict(tmp_path, field, values, x):
    key = "mllsgd.theorem1"
    s = default_scenario(key).replace(K=128, eta=1e-3, replicas=8)
    ax = plots.against(key, field, values, s, exact=True, x=x)
    bound_line = ax.get_lines()[0]
    verdicts = [check(key, s.replace(**{field: v}), exact=True) for v in values]
    np.testing.assert_allclose(bound_line.get_ydata(), [v.bound for v in verdicts], rtol=1e-12)
    xs = [v.params[x] for v in verdicts] if x else values
    np.testing.assert_allclose(bound_line.get_xdata(), xs)
    if x == "zeta":   # more hubs on a path: larger zeta (Castiglia et al. 2021, Section 6)
        assert np.all(np.diff(bound_line.get_xdata()) > 0)
    out = plots.save(ax, str(tmp_path / f"{field}.png"))
    assert (tmp_path / f"{field}.png").stat().st_size > 5_000 and out.endswith(".png")


@pytest.mark.parametrize("key", bounds.keys())
def test_every_result_has_a_report_figure(key):
    """The adapter's figure of each result on its default scenario (the HTML report's)."""
    fig, ax = plt.subplots()
    out = adapter_for(key).plot(default_scenario(key), ax=ax)
    assert out is ax and len(ax.get_lines()) + len(ax.patches) + len(ax.collections) >= 2
    assert ax.get_legend() is not None and ax.get_title()
    plt.close(fig)

"""The plots draw the numbers that check() and the theorems compute."""

import json
import re

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


def _unlabelled_axes(fig) -> list[str]:
    """Every axis of ``fig`` whose label is empty or states no unit of ``plots.UNITS`` in
    brackets at its end (``"round t [count]"``), as "axes i x|y: label"."""
    bad = []
    for i, ax in enumerate(fig.axes):
        for which, text in (("x", ax.get_xlabel()), ("y", ax.get_ylabel())):
            unit = re.search(r"\S.*\[([^\[\]]+)\]$", text)
            if unit is None or unit[1] not in plots.UNITS:
                bad.append(f"axes {i} {which}: {text!r}")
    return bad


@pytest.mark.parametrize("key", bounds.keys())
def test_every_result_has_a_report_figure(key):
    """The adapter's figure of each result on its default scenario (the HTML report's):
    its lines, legend, title, and a label with its unit on every axis."""
    fig, ax = plt.subplots()
    out = adapter_for(key).plot(default_scenario(key), ax=ax)
    assert out is ax and len(ax.get_lines()) + len(ax.patches) + len(ax.collections) >= 2
    assert ax.get_legend() is not None and ax.get_title()
    assert _unlabelled_axes(fig) == [], key
    plt.close(fig)


def test_check_all_labels_every_axis_of_its_figures_witnesses_too(tmp_path, monkeypatch):
    """The figures ``check --all`` draws (a refuted result: its default and each witness),
    caught as they are saved: every axis has a label with its unit."""
    from verify import suite
    from verify.cli import main

    drawn, png = [], suite.png
    monkeypatch.setattr(suite, "png", lambda fig: (drawn.append(_unlabelled_axes(fig)), png(fig))[1])
    main(["check", "--all", "--only", "afl.theorem3", "--battery", "0", "--report",
          str(tmp_path / "r")])
    kinds = {r["kind"] for r in json.loads((tmp_path / "r" / "summary.json").read_text())["rows"]}
    assert kinds == {"default", "witness"} and len(drawn) >= 2
    assert drawn == [[]] * len(drawn)


def test_an_axis_states_a_known_unit():
    assert plots.label("round t", plots.COUNT) == "round t [count]"
    with pytest.raises(ValueError, match="unit='furlongs' must be one of"):
        plots.label("distance", "furlongs")
    assert plots.field_label("T", "hfl.theorem2") == "T [time units]"
    assert plots.field_label("T", "afl.theorem2") == "T [count]"
    assert plots.field_label("problem.mystery") == "problem.mystery [scenario units]"

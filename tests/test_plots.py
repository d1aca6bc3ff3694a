"""The plots draw the numbers that check() and the theorems compute."""

import json

import matplotlib.pyplot as plt
import numpy as np
import pytest
from figure_checks import unitless_axes, unnamed_curves
from figure_extents import clipped_texts
from hypothesis import given
from hypothesis import strategies as st
from matplotlib.transforms import Bbox

from fedbound import bounds
from fedbound.verify import adapter_for, check, default_scenario, figures, plots


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
    fig = ax.figure   # as returned, and as saved: every text inside, every curve named
    assert (clipped_texts(fig), unnamed_curves(fig), unitless_axes(fig, plots.UNITS)) == ([], [], [])
    out = figures.save(ax, str(tmp_path / f"{field}.png"))
    assert clipped_texts(fig) == []
    assert (tmp_path / f"{field}.png").stat().st_size > 5_000 and out.endswith(".png")


def _unlabelled_axes(fig) -> list[str]:
    """Every axis of ``fig`` whose label is empty or states no unit of ``plots.UNITS`` in
    brackets at its end (``"round t [count]"``), as "axes i x|y: label"."""
    return unitless_axes(fig, plots.UNITS)


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
    from fedbound.verify import suite
    from fedbound.verify.cli import main

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


def test_every_family_sweeps_a_field_of_known_unit():
    from fedbound.verify.families import families

    found = families()
    assert found
    for key, family in found.items():
        unit = plots.field_label(family.parameter, key).rsplit("[", 1)[1]
        assert unit in {f"{u}]" for u in plots.UNITS - {plots.SCENARIO}}, (key, unit)


# ---------------------------------------------------------------- the report's figures, laid out


def _drawn_figures(monkeypatch, keys) -> dict[str, object]:
    """The figures ``check --all`` draws for ``keys`` (each as its PNG is saved, so drawn), by
    the scenario they draw; tight_layout made to fail, so a figure that used it is seen."""
    from matplotlib.figure import Figure

    from fedbound.verify import suite

    def no_tight_layout(self, *args, **kwargs):
        raise AssertionError("a check's figure measured its layout (tight_layout)")

    monkeypatch.setattr(Figure, "tight_layout", no_tight_layout)
    drawn, png = {}, suite.png
    todo = [t for t in suite.tasks(keys, battery=0, figures=True) if t.figure is not None]
    for task in todo:
        monkeypatch.setattr(suite, "png", lambda fig, t=task: (drawn.__setitem__(
            f"{t.key} {t.figure.label}", fig), png(fig))[1])
        assert isinstance(suite.run_task(task).figure, bytes), task
    return drawn


def _shown(axis):
    """The non-empty tick labels of ``axis`` inside its view (the ones drawn)."""
    lo, hi = sorted(axis.get_view_interval())
    return [t for locs, labels in ((axis.get_majorticklocs(), axis.get_majorticklabels()),
                                   (axis.get_minorticklocs(), axis.get_minorticklabels()))
            for x, t in zip(locs, labels, strict=True)
            if lo <= x <= hi and t.get_visible() and t.get_text()]


def _texts(fig):
    """Every text a reader sees on ``fig``'s one axes: title, axis labels, the labels of its
    ticks (major and minor, non-empty), and the legend's entries."""
    (ax,) = fig.axes
    ticks = [t for axis in (ax.xaxis, ax.yaxis) for t in _shown(axis)]
    legend = ax.get_legend().get_texts() if ax.get_legend() else []
    return [ax.title, ax.xaxis.label, ax.yaxis.label], ticks, legend


def _overlap(a, b) -> bool:
    return a.x0 < b.x1 - 0.5 and b.x0 < a.x1 - 0.5 and a.y0 < b.y1 - 0.5 and b.y0 < a.y1 - 0.5


@pytest.fixture(scope="module")
def report_figures():
    """Every figure ``check --all --report`` draws: each result's default scenario, and each
    refutation of a refuted result (25 figures)."""
    with pytest.MonkeyPatch.context() as mp:  # undone before the other tests run
        figures = _drawn_figures(mp, None)
    return figures


def test_every_report_figure_fits_its_canvas_and_names_what_it_draws(report_figures):
    """No text at the edge (tests/figure_extents.py), a legend entry for every curve, a
    unit on every axis: the figures of the check report, all of them."""
    assert len(report_figures) >= len(bounds.keys())
    bad = {name: found for name, fig in report_figures.items()
           if (found := clipped_texts(fig) + unnamed_curves(fig) + _unlabelled_axes(fig))}
    assert bad == {}
    # a result page stacks its figures (700 px each): a title says "below", never "beside"
    titles = [fig.axes[0].get_title() for fig in report_figures.values()]
    assert any("drawn below" in t for t in titles) and not [t for t in titles if "beside" in t]


def test_the_clipping_check_sees_text_off_the_canvas():
    """clipped_texts must be able to fail: a long label on a small figure without a layout,
    a legend placed outside the axes, and a tick label pushed off the right edge."""
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.plot([1, 2], [1, 10], label="a curve whose name is far too long for this figure")
    ax.set_ylabel("a quantity with a long name [loss²/param²]", fontsize=20)
    ax.legend(loc="center left", bbox_to_anchor=(0.9, 0.5))
    ax.set_xticks([1, 2], ["1", "a very long tick label at the right"])
    found = clipped_texts(fig)
    assert "a quantity with a long name [loss²/param²]" in found
    assert "a curve whose name is far too long for this figure" in found
    assert "a very long tick label at the right" in found
    fig.set_layout_engine("constrained")
    ax.get_legend().remove()
    ax.set_xticks([1, 2], ["1", "2"])
    ax.set_ylabel("y [loss]")
    assert clipped_texts(fig) == []
    plt.close(fig)


def test_the_curve_check_sees_an_unnamed_curve_and_one_left_out_of_the_legend():
    fig, ax = plt.subplots()
    ax.plot([1, 2], [1, 2], label="named")
    ax.plot([1, 2], [2, 1])                              # no label at all
    ax.legend()
    ax.plot([1, 2], [3, 3], label="after the legend")   # named, but not in it
    ax.fill_between([1, 2], [0, 0], [1, 1])              # a band: not a curve
    assert unnamed_curves(fig) == ["axes 0: 'after the legend' is not in a legend",
                                   "axes 0: an unlabelled Line2D"]
    plt.close(fig)


def _sweep_rows():
    """Stored verdicts of a made-up sweep over tau and problem.sigma (the layout is under
    test, not the checks)."""
    rows = []
    for tau in (1, 2, 4):
        for sigma in (0.1, 0.5, 2.0):
            bound, measured = tau * sigma, 0.3 * tau * sigma
            rows.append({"key": "mllsgd.theorem1", "variant": "proof",
                         "scenario": {"tau": tau, "problem": {"sigma": sigma}},
                         "verdict": {"bound": bound, "measured_mean": measured,
                                     "measured_ci": [0.9 * measured, 1.1 * measured],
                                     "slack": bound / measured, "verdict": "holds"},
                         "error": None})
    return rows


@pytest.mark.parametrize("draw", [lambda rows: plots.sweep_against(rows, "tau"),
                                  lambda rows: plots.slack_heatmap(rows, "tau", "problem.sigma")],
                         ids=["against", "heatmap"])
def test_a_sweep_reports_figures_fit_as_returned_and_as_saved(draw, tmp_path):
    ax = draw(_sweep_rows())
    fig = ax.figure
    assert (clipped_texts(fig), unnamed_curves(fig), _unlabelled_axes(fig)) == ([], [], [])
    figures.save(ax, str(tmp_path / "f.png"))
    assert clipped_texts(fig) == []


def test_a_checks_own_figure_fits_its_canvas():
    """Adapter.plot without an axes makes its own figure (a notebook shows it as it is)."""
    ax = adapter_for("afl.theorem3").plot(default_scenario("afl.theorem3"))
    assert clipped_texts(ax.figure) == [] and unnamed_curves(ax.figure) == []
    plt.close(ax.figure)


def test_report_figures_are_laid_out_without_measuring_and_without_mathtext(report_figures):
    """Fixed margins (no layout engine, tight_layout never called), and log tick labels in
    plain text: 10⁻² and 3×10⁻², no ``$...$`` for mathtext to parse."""
    assert len(report_figures) >= 4
    for name, fig in report_figures.items():
        (ax,) = fig.axes
        assert fig.get_layout_engine() is None, name
        ticks = _texts(fig)[1]
        assert ticks and not [t.get_text() for t in ticks if "$" in t.get_text()], name
        assert any("10" in t.get_text() for t in ticks), name
        width, height = fig.get_size_inches()
        params = fig.subplotpars
        assert params.left == pytest.approx(figures.MARGIN_LEFT / width), name
        assert params.right == pytest.approx(1 - figures.MARGIN_RIGHT / width), name


def test_report_figures_clip_and_overlap_nothing(report_figures):
    """As drawn: every text lies inside the figure; the title stays above the axes; tick
    labels of one axis do not overlap; the legend covers no bar and no axis text."""
    for name, fig in report_figures.items():
        (ax,) = fig.axes
        labels, ticks, _ = _texts(fig)
        boxes = {t.get_text(): t.get_window_extent() for t in [*labels, *ticks]}
        inside = fig.bbox.padded(0.5)
        assert not [s for s, b in boxes.items() if not inside.containsx(b.x0)
                    or not inside.containsx(b.x1) or not inside.containsy(b.y0)
                    or not inside.containsy(b.y1)], name
        assert ax.title.get_window_extent().y0 >= ax.bbox.y1, name
        for axis in (ax.xaxis, ax.yaxis):
            own = [t.get_window_extent() for t in _shown(axis)]
            assert not [(a, b) for i, a in enumerate(own) for b in own[i + 1:]
                        if _overlap(a, b)], (name, axis.axis_name)
        legend = ax.get_legend().get_window_extent()
        assert fig.bbox.padded(0.5).contains(legend.x0, legend.y0), name
        assert fig.bbox.padded(0.5).contains(legend.x1, legend.y1), name
        bars = [Bbox.intersection(p.get_window_extent(), ax.bbox) for p in ax.patches]
        covered = [b for b in bars if b is not None and _overlap(b, legend)]  # as clipped
        covered += [t.get_text() for t in [ax.xaxis.label, *ticks]
                    if _overlap(t.get_window_extent(), legend)]
        assert covered == [], name


def test_a_bar_figures_legend_sits_below_its_axes(report_figures):
    """hfl.lemma1 draws bars that reach the top of its axes: its legend is below them, and
    its cells are ticked at whole numbers."""
    fig = report_figures["hfl.lemma1 the default scenario"]
    (ax,) = fig.axes
    assert len(ax.patches) >= 4
    assert ax.get_legend().get_window_extent().y1 < ax.xaxis.label.get_window_extent().y0
    assert all(float(x).is_integer() for x in ax.get_xticks())


@given(coeff=st.integers(1, 9), exponent=st.integers(-30, 30))
def test_a_log_tick_label_reads_back_as_its_value(coeff, exponent):
    """PowerFormatter's label, read as a reader does (superscript digits, ×), is the tick."""
    value = coeff * 10.0 ** exponent
    text = figures.PowerFormatter()._num_to_string(value, value / 10, value * 10)
    mantissa, _, power = text.rpartition("10")
    digits = power.translate(str.maketrans("⁻⁰¹²³⁴⁵⁶⁷⁸⁹", "-0123456789"))
    assert "$" not in text and power and not power.isascii()
    assert int(mantissa.rstrip("×") or 1) == coeff and int(digits) == exponent


def test_a_figure_of_several_axes_is_laid_out_too():
    """A plugin's figure with a twin axis: tight_layout, and still a PNG."""
    from matplotlib.figure import Figure

    from fedbound.verify import suite

    fig = Figure(figsize=(7, 4.6))
    ax = fig.add_subplot()
    ax.plot([1, 2], [1, 2])
    ax.twinx().plot([1, 2], [2, 1])
    assert suite.png(fig).startswith(b"\x89PNG")
    assert fig.subplotpars.left != pytest.approx(figures.MARGIN_LEFT / 7)


def test_a_bound_stated_for_the_whole_run_is_drawn_at_its_end_only():
    """afl.theorem3 bounds the average over all T rounds: its default figure draws the bound
    at round T alone, where the verdict compares it with the running mean's last point (a
    line across the run stood under running means 4x above it, which the theorem says
    nothing about, under a title saying it holds)."""
    key = "afl.theorem3"
    s = default_scenario(key)
    fig, ax = plt.subplots()
    adapter_for(key).plot(s, ax=ax)
    running, bound = ax.get_lines()
    v = check(key, s)
    assert list(bound.get_xdata()) == [s.T] == [running.get_xdata()[-1]]
    assert bound.get_ydata()[0] == pytest.approx(v.bound, rel=1e-12)
    assert running.get_ydata()[-1] == pytest.approx(v.measured_mean, rel=1e-12)
    # the picture says what the verdict says: below the bound at the end, above it earlier
    assert v.verdict == "holds" and running.get_ydata()[-1] < bound.get_ydata()[0]
    assert running.get_ydata()[0] > 4 * bound.get_ydata()[0]
    plt.close(fig)

"""The figures of ``fedbound reproduce --report`` and notebook 07 (``verify.claimplots``),
drawn from the stored quick reproduction of every claim of the four papers
(``notebooks/data/claims_quick.json``) and from the synthetic paper's claims that end in each
verdict: every text inside the canvas (``figure_extents.clipped_texts``), a legend that
names every curve, axis labels, a forest plot with a row per test, and a caption that
describes only what is drawn."""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib
import pytest

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from figure_extents import clipped_texts  # noqa: E402

from fedbound.verify.claimplots import claim_caption, claim_figure, claims_grid  # noqa: E402

STORED = HERE.parent / "notebooks" / "data" / "claims_quick.json"


@pytest.fixture(scope="module")
def stored():
    pytest.importorskip("sklearn", reason="the papers' claims need fedbound[data]")
    from fedbound.verify.api import load_reproduction

    return load_reproduction(STORED)


def _ids():
    import json

    return [c["id"] for c in json.loads(STORED.read_text())["claims"]]


def _check(fig, result, rep) -> None:
    """The figure's contract (module docstring), for one claim."""
    assert clipped_texts(fig) == []
    *curves, forest = [ax for ax in fig.axes if ax.get_ylabel() != "bound (estimated constants)"]
    assert len(curves) == len(result.decisions)
    legend = {t.get_text() for t in fig.legends[0].get_texts()}
    for d, ax in zip(result.decisions, curves, strict=True):
        outcome = rep.outcome(result.claim, d.reading)
        assert set(result.claim.curves or outcome.curves) <= legend  # every curve named
        assert ax.get_xlabel() and ax.get_ylabel()
    rows = [t for d in result.decisions for t in d.tests]
    assert len(forest.get_yticks()) == len(rows) and forest.get_xlabel().startswith("paired")
    caption = claim_caption(result, rep)
    assert ("dotted" in caption) == ("where the claim is decided" in legend)
    assert ("diamonds" in caption) == any("bound" in label for label in legend)
    assert ("+- its margin" in caption) == any(t.kind in ("above", "below") for t in rows)
    assert ("tolerance" in caption) == any(t.kind == "between" for t in rows)


@pytest.mark.parametrize("claim_id", _ids())
def test_each_claims_figure_fits_names_its_curves_and_shows_every_test(stored, claim_id):
    (result,) = [r for r in stored.results if r.claim.id == claim_id]
    fig = claim_figure(result, stored)
    try:
        _check(fig, result, stored)
    finally:
        plt.close(fig)


def test_the_figures_of_every_verdict_fit(tmp_path, monkeypatch):
    """The synthetic paper's claims: agrees, contradicts, undecided (a tolerance),
    negligible, fixed by the setting (identical runs, and said so without a run), censored
    hitting times; and their small panels in one grid."""
    import synth_claims

    from fedbound.verify import claims as catalogue
    from fedbound.verify.reproduce import reproduce

    if "synth.base" not in catalogue._EXPERIMENTS:
        synth_claims.register()
    try:
        rep = reproduce("synth", claim_ids=["fig1.a-lower", "fig1.b-lower", "fig2.b-like-c",
                                            "fig5.c-below-b", "fig6.b-again", "fig7.stated",
                                            "fig8.a-sooner"], quick=True, seeds=12)
        assert {r.verdict for r in rep.results} == {"agrees", "contradicts", "undecided",
                                                    "negligible", "fixed-by-setting"}
        for r in rep.results:
            fig = claim_figure(r, rep)
            try:
                _check(fig, r, rep)
            finally:
                plt.close(fig)
        fixed = next(r for r in rep.results if r.claim.id == "synth.fig7.stated")
        assert "said so in its row" in claim_caption(fixed, rep)
        grid = claims_grid(rep.results, rep, columns=3)
        assert clipped_texts(grid) == []
        plt.close(grid)
    finally:
        synth_claims.unregister()


@pytest.mark.parametrize("paper", ["mllsgd", "hfl", "tdcd", "afl"])
def test_a_papers_grid_of_panels_fits(stored, paper):
    """Each paper's grid of small panels, as notebook 07 draws it: every text inside the
    canvas, a panel with a legend for every decided claim."""
    mine = [r for r in stored.results if r.claim.paper == paper and r.decisions]
    fig = claims_grid(mine, stored)
    try:
        assert clipped_texts(fig) == []
        panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
        assert len(panels) == len(mine) > 0 and all(ax.get_legend() for ax in panels)
    finally:
        plt.close(fig)


def test_clipped_texts_names_a_text_outside_the_canvas():
    fig, ax = plt.subplots(figsize=(3, 2))
    ax.set_xlim(10, 20)
    ax.set_ylabel("a label")
    fig.text(0.98, 0.5, "far right, cut")
    fig.subplots_adjust(left=0.0, bottom=0.3)  # the y tick labels and the label left of the canvas
    try:
        clipped = clipped_texts(fig)
        assert "far right, cut" in clipped and "a label" in clipped and "0.50" in clipped
        assert all(t not in clipped for t in ("14", "16"))  # the x ticks inside
        fig.subplots_adjust(left=0.3, right=0.7, bottom=0.3)
        fig.texts[0].set_x(0.5)
        assert clipped_texts(fig) == []
    finally:
        plt.close(fig)

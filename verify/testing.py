"""Testing theory, fedbound's and anyone's: assertions, contract checks, registration.

* :func:`assert_holds` / :func:`assert_violated`: a check as a test assertion; the message
  carries the bound, the measured mean and interval, the slack, the violated conditions
  and the scenario JSON, so a failing CI run says what broke.
* :func:`check_adapter`: fedbound's contract checks on any adapter (as scikit-learn's
  ``check_estimator``), each recorded as passed, failed, expected failure, skipped or
  warning (a hook the adapter should implement and does not, with a
  :class:`ContractWarning`); :func:`parametrize_with_checks` turns them into pytest cases.
* :func:`registered`: register a theorem (and its adapter, and a witness directory) for the
  duration of a ``with`` block.

The pytest plugin (``pytest_fedbound``, installed with fedbound) offers the same as a
marker: ``@pytest.mark.fedbound("my.theorem")`` on a test taking ``fedbound_check``.
"""

from __future__ import annotations

import contextlib
import copy
import math
import warnings
from collections.abc import Callable, Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from fedbound import bounds

from .adapter import Adapter, adapter_for, register_adapter, unregister_adapter
from .check import check
from .scenario import json_text
from .verdict import Verdict
from .witnesses import register_witness_dir, unregister_witness_dir, witnesses

__all__ = [
    "CHECKS", "CheckResult", "ContractWarning", "SkipCheck", "assert_holds", "assert_violated",
    "check_adapter", "check_chooser", "check_claims", "parametrize_with_checks", "registered",
]


def _explain(v: Verdict, headline: str) -> str:
    from .text import format_verdict

    return f"{headline}\n{format_verdict(v)}\nscenario:\n{json_text(v.scenario)}"


def assert_holds(key: str, scenario=None, *, variant: str | None = None,
                 exact: bool | None = None) -> Verdict:
    """Check ``key`` on ``scenario`` (anything :func:`verify.check` takes) and return the
    verdict if the bound holds; raise AssertionError otherwise. An inconclusive verdict
    fails too, with a message asking for more replicas (or exact mode)."""
    v = check(key, scenario, variant=variant, exact=exact)
    if v.verdict == "holds":
        return v
    if v.verdict == "inconclusive":
        raise AssertionError(_explain(
            v, f"{key} [{v.variant}]: INCONCLUSIVE with {v.replicas} replicas: the 95% interval "
               "straddles the bound; increase the scenario's replicas (or use exact=True where "
               "the adapter has an exact mode)"))
    hyp = "" if v.admissible else " (the theorem's hypotheses fail here: " + "; ".join(v.violations) + ")"
    raise AssertionError(_explain(v, f"{key} [{v.variant}]: bound {v.verdict.upper()}{hyp}"))


def assert_violated(key: str, scenario, *, variant: str | None = None,
                    exact: bool | None = None) -> Verdict:
    """The converse, for regression tests of refutations: return the verdict if the bound is
    violated on ``scenario`` (a stored witness included), raise AssertionError otherwise
    (the refutation went stale)."""
    v = check(key, scenario, variant=variant, exact=exact)
    if v.verdict == "violated":
        return v
    raise AssertionError(_explain(v, f"{key} [{v.variant}]: expected VIOLATED, got "
                                     f"{v.verdict.upper()}: the refutation no longer reproduces"))


# ---------------------------------------------------------------------- contract checks


class SkipCheck(Exception):
    """A contract check that does not apply to an adapter (with the reason)."""


class WarnCheck(Exception):
    """A contract check that finds a hook missing that the adapter should implement: not a
    failure (the adapter works), a :class:`ContractWarning` with the reason."""


class ContractWarning(UserWarning):
    """An adapter lacks a hook it should implement (``check_adapter``'s outcome "warning")."""


#: random scenarios drawn by the checks that need some
DRAWS = 3


def _small(adapter: Adapter, scenario):
    """``scenario`` with at most 32 replicas (the checks need speed, not precision)."""
    if hasattr(scenario, "replicas") and scenario.replicas > 32:
        return scenario.replace(replicas=32)
    return scenario


def _draws(adapter: Adapter, n: int = DRAWS, seed: int = 0):
    return [adapter.random_scenario(np.random.default_rng([seed, j])) for j in range(n)]


def check_default_round_trip(adapter: Adapter) -> None:
    """The default scenario validates and survives JSON (to_json, load) unchanged."""
    s = adapter.default_scenario()
    s.validate()
    back = adapter.load(s.to_json())
    assert back == s, f"{adapter.key}: the default scenario changes through JSON: {s} != {back}"
    assert back.digest() == s.digest(), f"{adapter.key}: the digest is not stable"


def check_parameters(adapter: Adapter) -> None:
    """Every variant's parameters derive from the default scenario: known names, every
    required one, finite values."""
    s = adapter.default_scenario()
    for variant in bounds.variants(adapter.key):
        params = adapter.parameters(s, adapter.theorem(variant))
        assert params, f"{adapter.key} [{variant}]: no parameters derived"


def check_footprint(adapter: Adapter) -> None:
    """The adapter estimates a scenario's peak memory and work from its sizes (``_footprint``),
    so that the resource limits refuse an oversized scenario before it runs: a warning when
    it does not; where it does, the default scenario's estimate is positive and finite."""
    if not adapter.overrides("_footprint"):
        raise WarnCheck(f"{adapter.key}: the adapter has no _footprint, so the resource limits "
                        "(--max-memory, --max-steps) cannot refuse an oversized scenario before "
                        "it runs; estimate it with verify.api.Footprint.of from the scenario's sizes")
    fp = adapter.footprint(adapter.default_scenario())
    assert fp is not None, f"{adapter.key}: _footprint gives no estimate of the default scenario"
    assert 0 < fp.bytes < math.inf and 0 < fp.steps < math.inf, (
        f"{adapter.key}: the default scenario's footprint must be positive and finite: {fp}")


def check_variants_evaluate(adapter: Adapter) -> None:
    """Every variant evaluates to a number (or +inf) at the default scenario's parameters."""
    s = adapter.default_scenario()
    for variant in bounds.variants(adapter.key):
        thm = adapter.theorem(variant)
        value = np.asarray(thm.evaluate(**adapter.parameters(s, thm)), dtype=float)
        assert not np.isnan(value).any(), f"{adapter.key} [{variant}]: the bound is NaN"


def check_random_reproducible(adapter: Adapter) -> None:
    """The same seed draws the same scenario; the draws validate."""
    try:
        a, b = (adapter.random_scenario(np.random.default_rng(7)) for _ in range(2))
    except NotImplementedError as e:
        raise AssertionError(str(e)) from None
    assert a.to_dict() == b.to_dict(), f"{adapter.key}: the same seed drew different scenarios"


def check_random_admissible(adapter: Adapter) -> None:
    """Random scenarios satisfy the default variant's hypotheses."""
    thm = adapter.theorem()
    for s in _draws(adapter):
        bad = thm.violations(**adapter.parameters(s, thm))
        assert not bad, (f"{adapter.key}: a random scenario is inadmissible: "
                         f"{'; '.join(map(str, bad))}\n{s.to_json()}")


def check_deterministic(adapter: Adapter) -> None:
    """The same scenario and seed give the same verdict, bit for bit."""
    s = _small(adapter, adapter.default_scenario())
    first, second = (adapter.check(copy.deepcopy(s)).as_dict() for _ in range(2))
    assert first == second, f"{adapter.key}: two checks of one scenario differ"


def check_holds_on_default(adapter: Adapter) -> None:
    """The default variant holds on the default scenario."""
    s = adapter.default_scenario()
    assert_holds(adapter.key, s, exact=_exact(adapter, s))


def check_holds_on_random(adapter: Adapter) -> None:
    """The default variant holds on random admissible scenarios."""
    for s in _draws(adapter):
        assert_holds(adapter.key, s, exact=_exact(adapter, s))


def _exact(adapter: Adapter, scenario) -> bool:
    return adapter.tags.exact and adapter.supports_exact(scenario)


def check_exact_agrees(adapter: Adapter) -> None:
    """Where an exact mode is declared, it agrees with Monte Carlo (within 5 standard
    errors of the replica mean, plus round-off)."""
    if not adapter.tags.exact:
        raise SkipCheck("no exact mode declared (tags.exact is False)")
    candidates = [adapter.default_scenario(), *_draws(adapter)]
    s = next((c for c in candidates if adapter.supports_exact(c)), None)
    if s is None:
        raise SkipCheck("no default or random scenario supports exact mode")
    thm = adapter.theorem()
    params = adapter.parameters(s, thm)
    exact = adapter.measure(s, params, exact=True)
    mc = adapter.measure(s, params, exact=False)
    if mc.values is None or mc.diverged:
        raise SkipCheck("the Monte-Carlo run is not a sample (pathwise or diverged)")
    v = np.asarray(mc.values, dtype=float)
    se = v.std(ddof=1) / math.sqrt(len(v)) if len(v) > 1 else math.inf
    gap = abs(float(v.mean()) - float(np.mean(exact.exact)))
    assert gap <= 5 * se + 1e-9 * abs(float(np.mean(exact.exact))) + exact.atol, (
        f"{adapter.key}: exact {float(np.mean(exact.exact)):.6g} vs Monte Carlo {v.mean():.6g} "
        f"+- {se:.3g} (standard error)\n{s.to_json()}")


def check_witnesses(adapter: Adapter) -> None:
    """Every stored witness of the result still produces its recorded outcome."""
    stored = witnesses(adapter.key)
    if not stored:
        raise SkipCheck("no stored witness")
    for w in stored:
        v = check(w.key, w)
        assert v.verdict == w.expect, _explain(v, f"{w.source}: expected {w.expect}, got {v.verdict}")


CHECKS: dict[str, Callable[[Adapter], None]] = {f.__name__.removeprefix("check_"): f for f in (
    check_default_round_trip, check_parameters, check_footprint, check_variants_evaluate,
    check_random_reproducible, check_random_admissible, check_deterministic,
    check_holds_on_default, check_holds_on_random, check_exact_agrees, check_witnesses)}


@dataclass(frozen=True)
class CheckResult:
    """One contract check on one adapter: ``outcome`` is "passed", "failed", "xfail"
    (failed as expected, ``reason`` says why it was expected), "xpass" (expected to fail,
    passed), "skipped" or "warning" (a hook the adapter should implement is missing; the
    message says which)."""

    key: str
    check: str
    outcome: str
    message: str = ""


def expected_failures_of(key: str) -> dict[str, str]:
    """The failures a result's registered status leads one to expect: a refuted result may
    fail on random scenarios."""
    thm = bounds.get(key)
    if thm.status in bounds.REFUTED:
        return {"holds_on_random": f"{key} is registered as {thm.status}: {thm.notes}"}
    return {}


def _run(name: str, adapter: Adapter, expected: Mapping[str, str]) -> CheckResult:
    from .boundary import PluginError

    try:
        CHECKS[name](adapter)
    except SkipCheck as e:
        return CheckResult(adapter.key, name, "skipped", str(e))
    except WarnCheck as e:
        warnings.warn(str(e), ContractWarning, stacklevel=3)
        return CheckResult(adapter.key, name, "warning", str(e))
    except (AssertionError, PluginError) as e:  # a hook returned what the API does not take
        outcome = "xfail" if name in expected else "failed"
        return CheckResult(adapter.key, name, outcome, expected.get(name, str(e)) or str(e))
    return CheckResult(adapter.key, name, "xpass" if name in expected else "passed")


def check_adapter(adapter: Adapter | str, *, checks: Iterable[str] | None = None,
                  expected_failures: Mapping[str, str] | None = None) -> list[CheckResult]:
    """Run the contract checks (``CHECKS``, or the named ``checks``) on an adapter or a
    registered key. ``expected_failures``: {check name: reason}, added to those that the
    result's status implies (:func:`expected_failures_of`)."""
    ad = adapter_for(adapter) if isinstance(adapter, str) else adapter
    names = list(CHECKS) if checks is None else list(checks)
    unknown = sorted(set(names) - set(CHECKS))
    if unknown:
        raise ValueError(f"unknown check(s) {unknown}; checks are {sorted(CHECKS)}")
    expected = {**expected_failures_of(ad.key), **(expected_failures or {})}
    return [_run(name, ad, expected) for name in names]


@dataclass(frozen=True)
class Case:
    """One (result, check) pair, callable: runs the check, skips or fails as pytest expects."""

    key: str
    check: str
    expected_failure: str | None = None

    @property
    def id(self) -> str:
        return f"{self.key}-{self.check}"

    def __call__(self) -> None:
        import pytest

        try:
            CHECKS[self.check](adapter_for(self.key))
        except SkipCheck as e:
            pytest.skip(str(e))
        except WarnCheck as e:
            warnings.warn(str(e), ContractWarning, stacklevel=2)


def cases(keys: Iterable[str], *, checks: Iterable[str] | None = None,
          expected_failures: Mapping[str, Mapping[str, str]] | None = None) -> list[Case]:
    """The (key, check) cases of :func:`parametrize_with_checks`; ``expected_failures`` maps
    a key to {check: reason}."""
    names = list(CHECKS) if checks is None else list(checks)
    unknown = sorted(set(names) - set(CHECKS))
    if unknown:
        raise ValueError(f"unknown check(s) {unknown}; checks are {sorted(CHECKS)}")
    out = []
    for key in keys:
        adapter_for(key)  # an unknown key fails here, at collection
        expected = {**expected_failures_of(key), **(expected_failures or {}).get(key, {})}
        out += [Case(key, n, expected.get(n)) for n in names]
    return out


def parametrize_with_checks(keys: Iterable[str], *, checks: Iterable[str] | None = None,
                            expected_failures: Mapping[str, Mapping[str, str]] | None = None):
    """A pytest decorator running the contract checks on every key, as scikit-learn's
    ``parametrize_with_checks``::

        @parametrize_with_checks(["my.theorem"])
        def test_contract(fedbound_case):
            fedbound_case()

    Expected failures (``expected_failures[key][check] = reason``, and those a refuted
    status implies) are marked ``xfail`` with their reason."""
    import pytest

    params = [pytest.param(c, id=c.id, marks=[pytest.mark.xfail(reason=c.expected_failure)]
                           if c.expected_failure else [])
              for c in cases(keys, checks=checks, expected_failures=expected_failures)]
    return pytest.mark.parametrize("fedbound_case", params)


# ---------------------------------------------------------------------- choosers, claims


def check_chooser(chooser, *, replicas: int = 2) -> None:
    """Raise AssertionError naming the plugin, the hook and the field unless every hook of
    ``chooser`` (a ``verify.api.Chooser`` instance) returns what the extension API takes
    (``verify.boundary``: the right type, finite, in range): its knobs, inputs, variants
    and footprints, every variant's certified proposal (or ``NoCertificate``), the
    calibrated proposal, and a paired simulation of the grid's first two configurations on
    ``replicas`` replicas. What ``fedbound choose`` would answer with exit 70, in the
    plugin's own tests."""
    from .boundary import PluginError, checked_chooser
    from .choose import NoCertificate, grid

    c = checked_chooser(chooser)
    try:
        settings = grid(c.knobs())[:2]
        c.inputs()
        c.bound_footprints()
        for variant in c.variants():
            with contextlib.suppress(NoCertificate):
                c.certified(variant)
        c.calibrated()
        for s in settings:
            c.footprint(s, replicas)
        c.simulate(settings, replicas, paired=True)
    except PluginError as e:
        raise AssertionError(str(e)) from None


def check_claims(papers, *, seeds: int = 2) -> None:
    """Raise AssertionError naming the plugin, the experiment or claim and the field unless
    every experiment behind the claims of ``papers`` (a key prefix, or several) returns an
    outcome, and every claim tests, that the extension API takes (``verify.boundary``):
    each experiment is run quick on ``seeds`` seeds under each of its readings, and each
    claim decided on it. What ``fedbound reproduce`` would answer with exit 70, in the
    plugin's own tests."""
    from dataclasses import replace

    from .boundary import PluginError
    from .claims import Plan, claims, experiment
    from .claims_boundary import checked_outcome, checked_tests
    from .decide import VERDICTS

    selected = claims((papers,) if isinstance(papers, str) else tuple(papers))
    try:
        for exp_id in dict.fromkeys(c.experiment for c in selected):
            exp = experiment(exp_id)
            for plan in exp.plans(Plan(quick=True, seeds=seeds)):
                outcome = checked_outcome(exp, exp.run(replace(plan, seeds=seeds)))
                for c in selected:
                    if c.experiment == exp_id:
                        checked_tests(c, c.decide(outcome), VERDICTS)
    except PluginError as e:
        raise AssertionError(str(e)) from None


# ---------------------------------------------------------------------- registration


@contextmanager
def registered(key: str, title: str, build, variants=("proof",), default: str = "proof", *,
               adapter: Adapter | type[Adapter] | None = None, witness_dir=None):
    """Register the theorem ``key`` (``bounds.register`` arguments), its ``adapter`` and a
    directory of witnesses for the ``with`` block; everything is removed on exit, even
    after an error."""
    bounds.register(key, title, build, variants, default)
    try:
        if adapter is not None:
            register_adapter(adapter)
        if witness_dir is not None:
            register_witness_dir(witness_dir)
        yield
    finally:
        if witness_dir is not None:
            unregister_witness_dir(witness_dir)
        unregister_adapter(key)
        bounds.unregister(key)


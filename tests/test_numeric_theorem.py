"""``fedbound bound`` and ``step`` without sympy (issue 15, item 3): the numeric theorem of a
manifest (``bounds.manifest``) answers them, in a fresh process that never imports sympy,
with the very bytes the sympy theorem prints, errors included."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import functools
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from bounded import CEILING
from hypothesis import given, settings
from hypothesis import strategies as st

from fedbound import bounds
from fedbound.bounds import compiled, manifest
from fedbound.bounds import reduce as reduce_module
from fedbound.verify.adapter import adapter_for
from fedbound.verify.cli import main
from fedbound.verify.scenario import jsonable

ROOT = Path(__file__).resolve().parents[1]
#: results whose aggregates reduce through bounds.reduce: each must get a manifest
NUMERIC = ("mllsgd.", "tdcd.", "hfl.", "afl.")
#: per paper, values that pass each parameter's domain but break a rule the paper's reductions
#: or cross-parameter checks enforce (bounds.reduce): a schedule row mixing zero and non-zero
#: counts, t_max below the realised counts; a non-integer tau, m and m' above M
BROKEN = {"hfl.": [{"t": [[1, 0], [1, 1]]}, {"t_max": [1.0, 1.0]}],
          "afl.": [{"tau": 1.5}, {"m": 9.0, "M": 8.0}, {"m_prime": 9.0, "M": 8.0}]}

RUN = """
import contextlib, io, json, sys
from fedbound.verify.cli import main
out = []
for argv in json.load(sys.stdin):
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        rc = main(argv)
    out.append([rc, o.getvalue(), e.getvalue()])
print(json.dumps({"runs": out, "sympy": "sympy" in sys.modules}))
"""


def _default_params(key: str) -> dict:
    """The parameters the adapter derives from its default scenario: a valid point."""
    ad = adapter_for(key)
    return jsonable(ad.parameters(ad.default_scenario(), ad.theorem()))


def _cases(key: str) -> list[list[str]]:
    """Command lines of ``key``: valid parameters, an inadmissible step, a value outside its
    domain, an unknown parameter; ``step`` (max and min-bound) and a step given to it."""
    thm = bounds.get(key)
    p = _default_params(key)
    scalar = next(n for n in thm.required() if not thm.params[n].vector)
    cases = [p, {**p, scalar: -1.0}, {**p, "zzz": 1.0}]
    cases += [{**p, **b} for prefix, broken in BROKEN.items() if key.startswith(prefix)
              for b in broken if set(b) <= set(thm.params)]
    if thm.step is not None:
        cases.append({**p, thm.step: 1e3 * float(np.max(p[thm.step]))})
    lines = [["bound", key, "--json", "--params", json.dumps(c)] for c in cases]
    # a bound over groups or rounds is printed as JSON only (the text form formats a scalar)
    shape = ["--json"] if np.ndim(thm.evaluate(**p)) else []
    lines += [["bound", key, "--variant", v, *shape, "--params", json.dumps(p)]
              for v in bounds.variants(key)]
    if thm.step is not None:
        rest = json.dumps({k: v for k, v in p.items() if k != thm.step})
        lines += [["step", key, "--json", "--objective", o, "--params", rest]
                  for o in ("max", "min-bound")]
        lines += [["step", key, "--params", json.dumps(p)]]
    return lines


def _in_process(argv: list[str]) -> list:
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        rc = main(argv)
    return [rc, o.getvalue(), e.getvalue()]


def test_bound_and_step_without_sympy_print_what_the_sympy_theorem_prints(monkeypatch):
    keys = [k for k in bounds.keys() if k.startswith(NUMERIC)]
    lines = [line for k in keys for line in _cases(k)]
    with monkeypatch.context() as m:  # the sympy path, which writes each manifest
        m.setattr(manifest, "load", lambda key, variant=None: None)
        expected = [_in_process(line) for line in lines]
    for k in keys:
        for v in bounds.variants(k):
            assert manifest.load(k, v) is not None, (k, v)
    env = {**os.environ, "PYTHONPATH": str(ROOT),
           "XDG_CACHE_HOME": str(compiled.cache_dir().parents[1])}
    done = subprocess.run([sys.executable, "-c", RUN], input=json.dumps(lines), text=True,
                          capture_output=True, cwd=ROOT, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout)
    assert got["sympy"] is False
    assert {rc for rc, _, _ in expected} == {0, 1, 2}  # answers, inadmissible, refusals
    for line, want, have in zip(lines, expected, got["runs"], strict=True):
        assert have == want, line


def test_a_stale_or_damaged_manifest_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setattr(compiled, "cache_dir", lambda: tmp_path)
    thm = bounds.get("mllsgd.theorem1")
    assert manifest.load(thm.key) is None  # none yet
    assert manifest.save(thm)
    assert manifest.load(thm.key) is not None
    path = manifest.path(thm.key, thm.variant)
    path.write_text(path.read_text().replace('"status"', '"statut"'))  # damaged body
    assert manifest.load(thm.key) is None
    assert manifest.save(thm)
    monkeypatch.setattr(manifest, "_sympy_version", lambda: "0.0")  # stale key
    assert manifest.load(thm.key) is None


def _with_reduce(thm, reduce):
    """A copy of ``thm`` whose first aggregate reduces through ``reduce``."""
    g = thm.aggregates[0]
    out = copy.copy(thm)
    out.aggregates = [dataclasses.replace(g, reduce=reduce), *thm.aggregates[1:]]
    return out


def test_a_result_with_an_unnamed_reduction_has_no_manifest(tmp_path, monkeypatch):
    monkeypatch.setattr(compiled, "cache_dir", lambda: tmp_path)
    thm = bounds.get("hfl.theorem2")
    named = thm.aggregates[0].reduce
    for reduce in (lambda v: named(v),  # a lambda, a partial with a positional argument
                   functools.partial(reduce_module.k_statistic, {"K": 1.0}, axis=None),
                   functools.partial(reduce_module.k_statistic, name=np.float64(1), axis=None)):
        assert manifest.describe(_with_reduce(thm, reduce)) is None
    checked = copy.copy(bounds.get("afl.theorem2"))
    checked.cross_check = lambda params, given, vals: vals  # a check not named in bounds.reduce
    assert manifest.describe(checked) is None
    assert manifest.describe(thm) is not None


def test_reduce_imports_neither_sympy_nor_torch():
    probe = ("import sys, bounds.reduce, bounds.manifest\n"
             "print(sorted(m for m in ('sympy', 'torch') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=CEILING)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@settings(max_examples=40, deadline=None)
@given(eta=st.floats(1e-9, 1.0), K=st.integers(1, 200), tau=st.integers(1, 20),
       p=st.lists(st.floats(0.05, 1.0), min_size=1, max_size=5))
def test_numeric_theorem_equals_the_sympy_theorem_bit_for_bit(eta, K, tau, p):
    thm = bounds.get("mllsgd.theorem1")
    manifest.save(thm)
    num = manifest.load(thm.key)
    v = {"L": 1.0, "beta": 0.5, "sigma": 1.0, "Delta": 1.0, "eta": eta, "K": K, "q": 2,
         "tau": tau, "zeta": 0.5, "a": np.full(len(p), 1 / len(p)), "p": np.array(p)}
    assert num.evaluate(**v) == thm.evaluate(**v)
    assert num.terms(**v) == thm.terms(**v)
    assert num.admissible(**v) == thm.admissible(**v)
    assert [str(x) for x in num.violations(**v)] == [str(x) for x in thm.violations(**v)]
    rest = {k: x for k, x in v.items() if k != "eta"}
    try:
        want = thm.step_choice(**rest)
    except ValueError as e:
        with pytest.raises(ValueError) as got:
            num.step_choice(**rest)
        assert str(got.value) == str(e)
    else:
        assert num.step_choice(**rest) == want

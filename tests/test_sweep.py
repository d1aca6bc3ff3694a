"""``fedbound sweep``: specs, the SQLite store, resuming after SIGKILL, Dask, the report."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from fedbound.verify import pool as sweep_pool
from fedbound.verify import sweep
from fedbound.verify.cli import main

SPEC = {"key": "mllsgd.theorem1", "base": {"replicas": 16, "K": 16, "q": 2, "tau": 2},
        "grid": {"tau": [1, 2], "p": [0.7, 0.9]},
        "random": {"n": 2, "seed": 3, "fields": {"problem.sigma": {"low": 0.1, "high": 2, "log": True},
                                                 "graph": ["path", "ring"]}}}


def write(tmp_path, spec=SPEC, name="spec.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(spec))
    return path


def stored(db) -> list[tuple[str, str]]:
    """The stored rows (none while the driver has created the file but not yet its table)."""
    with sqlite3.connect(db) as conn:
        try:
            return list(conn.execute("SELECT digest, verdict FROM results ORDER BY digest"))
        except sqlite3.OperationalError:
            return []


def test_points_are_the_grid_times_the_draws_in_a_fixed_order():
    spec = sweep.SweepSpec.from_dict(SPEC)
    pts = list(spec.points())
    assert len(pts) == 2 * 2 * 2
    assert [(p["tau"], p["p"]) for p in pts[::2]] == [(1, 0.7), (1, 0.9), (2, 0.7), (2, 0.9)]
    sigmas = [p["problem"]["sigma"] for p in pts[:2]]
    assert sigmas == [p["problem"]["sigma"] for p in pts[2:4]]  # the same draws per grid point
    assert all(0.1 <= s <= 2 for s in sigmas) and sigmas[0] != sigmas[1]
    assert all(p["problem"]["kind"] == "quadratic" and p["replicas"] == 16 for p in pts)
    assert [p for p in sweep.SweepSpec.from_dict(SPEC).points()] == pts
    digests = {spec.digest(s) for s in spec.scenarios()}
    assert len(digests) == 8
    other = sweep.SweepSpec.from_dict({**SPEC, "variant": "tight"})
    assert not digests & {other.digest(s) for s in other.scenarios()}


@pytest.mark.parametrize("change, message", [
    ({"nope": 1}, "unknown field\\(s\\) \\['nope'\\]"),
    ({"key": "mllsgd.nope"}, "unknown result 'mllsgd.nope'"),
    ({"variant": "nope"}, "unknown variant 'nope'"),
    ({"grid": {"tau": []}, "random": None}, "grid.tau must be a non-empty list"),
    ({"grid": {}, "random": None}, "give a 'grid' or 'random'"),
    ({"random": {"n": 0, "fields": {"p": [0.8]}}}, "random must be"),
    ({"random": {"n": 2, "fields": {"p": {"low": 1}}}}, "random.fields.p must be a list"),
    ({"random": {"n": 2, "fields": {"p": {"low": 0, "high": 1, "log": True}}}}, "need 0 < low"),
    ({"grid": {"tau": [0]}}, "sweep point 0: tau=0 must be an integer >= 1"),
    ({"grid": {"K.x": [1]}}, "'K' is not an object"),
    ({"exact": "yes"}, "exact='yes' must be true or false"),
    ({"base": [1]}, "base must be an object"),
    ({"grid": [1]}, "grid must be an object"),
    ({"random": {"n": 2, "seed": None, "fields": {"p": [0.8]}}}, "random must be"),
])
def test_bad_specs_name_the_field(change, message):
    with pytest.raises(ValueError, match=message):
        sweep.SweepSpec.from_dict({**SPEC, **change}).scenarios()


def test_a_rerun_skips_every_stored_scenario_and_changes_nothing(tmp_path):
    spec = sweep.SweepSpec.from_dict(SPEC)
    store = sweep.Store(tmp_path / "s.sqlite")
    first = sweep.run_sweep(spec, store)
    assert first.as_dict() == {"total": 8, "skipped": 0, "ran": 8, "errors": 0, "others": 0}
    before = stored(tmp_path / "s.sqlite")
    again = sweep.run_sweep(spec, store)
    assert again.as_dict() == {"total": 8, "skipped": 8, "ran": 0, "errors": 0, "others": 0}
    assert stored(tmp_path / "s.sqlite") == before
    rows = store.rows()
    assert {r["digest"] for r in rows} == {spec.digest(s) for s in spec.scenarios()}
    assert all(r["verdict"]["verdict"] == "holds" and r["verdict"]["admissible"] for r in rows)
    store.close()


def test_process_pool_and_dask_store_the_same_verdicts_bit_for_bit(tmp_path):
    distributed = pytest.importorskip("distributed")
    spec = sweep.SweepSpec.from_dict(SPEC)
    serial = sweep.Store(tmp_path / "serial.sqlite")
    sweep.run_sweep(spec, serial)
    with sweep_pool.executor(jobs=2) as pool:
        procs = sweep.Store(tmp_path / "procs.sqlite")
        assert sweep.run_sweep(spec, procs, pool).ran == 8
    cluster = distributed.LocalCluster(n_workers=2, processes=False, threads_per_worker=1,
                                       dashboard_address=None)
    with distributed.Client(cluster) as client:
        dask_store = sweep.Store(tmp_path / "dask.sqlite")
        assert sweep.run_sweep(spec, dask_store, client.get_executor()).ran == 8
    cluster.close()
    for s in (serial, procs, dask_store):
        s.close()
    reference = stored(tmp_path / "serial.sqlite")
    assert stored(tmp_path / "procs.sqlite") == reference
    assert stored(tmp_path / "dask.sqlite") == reference


def test_cli_sweep_on_a_dask_local_cluster(tmp_path, capsys):
    pytest.importorskip("distributed")
    spec = write(tmp_path, {**SPEC, "random": None})
    db = tmp_path / "d.sqlite"
    assert main(["sweep", str(spec), "--db", str(db), "--dask-local", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ran"] == 4 and out["total"] == 4 and len(stored(db)) == 4


def test_sweep_killed_mid_run_resumes_and_stores_each_scenario_once(tmp_path):
    """SIGKILL the driver once some scenarios are stored; the rerun completes the sweep
    with every scenario stored exactly once and the same verdicts as an unbroken run."""
    spec = {**SPEC, "base": {**SPEC["base"], "K": 128, "replicas": 32}}
    path, db = write(tmp_path, spec), tmp_path / "k.sqlite"
    cmd = [sys.executable, "-m", "fedbound", "sweep", str(path), "--db", str(db), "--jobs", "1"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and proc.poll() is None:
            if db.exists() and len(stored(db)) >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the sweep finished before it could be killed"
        proc.send_signal(signal.SIGKILL)  # the driver only
        proc.wait(30)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # any orphaned pool worker
        except ProcessLookupError:
            pass
    partial = len(stored(db))
    assert 2 <= partial < 8
    resumed = subprocess.run(cmd + ["--json"], capture_output=True, text=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr
    out = json.loads(resumed.stdout)
    assert out["total"] == 8 and out["skipped"] >= partial and out["ran"] == 8 - out["skipped"]
    rows = stored(db)
    assert len(rows) == len({d for d, _ in rows}) == 8
    unbroken = sweep.Store(tmp_path / "u.sqlite")
    sweep.run_sweep(sweep.SweepSpec.from_dict(spec), unbroken)
    unbroken.close()
    assert rows == stored(tmp_path / "u.sqlite")


def test_report_of_a_sweep(tmp_path, capsys):
    path, db = write(tmp_path), tmp_path / "r.sqlite"
    assert main(["sweep", str(path), "--db", str(db), "--jobs", "1"]) == 0
    assert "8 scenarios, 0 already stored, 8 run" in capsys.readouterr().out
    out = tmp_path / "rep"
    assert main(["report", "--db", str(db), "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["rows"] == 8
    names = {p.name for p in (out / "figures").glob("*.png")}
    assert {"mllsgd_theorem1_proof_tau.png", "mllsgd_theorem1_proof_p.png",
            "mllsgd_theorem1_proof_problem_sigma.png",
            "mllsgd_theorem1_proof_slack_p_tau.png"} <= names
    page = (out / "index.html").read_text()
    assert page.count("<tr class='holds'>") == 8


def test_cli_errors(tmp_path, capsys):
    assert main(["sweep", str(tmp_path / "missing.json")]) == 2
    assert "No such file" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["sweep", str(bad)]) == 2
    assert "not valid JSON" in capsys.readouterr().err
    assert main(["report", "--db", str(tmp_path / "none.sqlite")]) == 2
    assert "no such file" in capsys.readouterr().err
    junk = tmp_path / "junk.sqlite"
    junk.write_text("this is not a database" * 100)
    assert main(["report", "--db", str(junk)]) == 2
    assert "is not a fedbound store" in capsys.readouterr().err
    spec = write(tmp_path)
    assert main(["sweep", str(spec), "--scheduler", "x", "--dask-local", "1"]) == 2
    assert "not both" in capsys.readouterr().err

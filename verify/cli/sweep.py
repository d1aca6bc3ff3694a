"""``fedbound sweep`` and ``fedbound report``: a grid of scenarios into a resumable SQLite
store, and the plots and tables of a store."""

from __future__ import annotations

import os

from .cluster import checked_store, cluster_arguments
from .common import Command, Exit, count, progress_bar


def run_sweep(args):
    from .. import pool, sweep

    spec = sweep.SweepSpec.load(args.spec)
    entries = spec.entries()  # every scenario validated before any file is created
    checked_store(args.db)
    jobs = (os.cpu_count() or 1) if args.jobs is None else args.jobs
    with pool.executor(jobs=jobs, scheduler=args.scheduler, dask_local=args.dask_local,
                        connect_timeout=args.connect_timeout) as ex:
        store = sweep.Store(args.db)
        try:
            with progress_bar(total=len(entries), desc=f"sweep {spec.key}",
                              unit="scenario") as bar:
                def progress(stored, total):
                    bar.update(stored - bar.n)
                res = sweep.run_sweep(spec, store, ex, progress=progress, entries=entries,
                                      window=2 * (args.dask_local or jobs))
        finally:
            store.close()
    out = {**res.as_dict(), "db": args.db}
    status = 4 if res.errors else 0
    if args.json:
        return Exit(out, status)
    others = f", {res.others} by another driver" if res.others else ""
    print(f"{spec.key}: {res.total} scenarios, {res.skipped} already stored, {res.ran} run "
          f"({res.errors} errors){others} -> {args.db}")
    return Exit(None, status)


def run_report(args):
    from .. import limits, output, report, sweep
    from ..reproduce import STORE_KIND

    output.check_dir(args.out, "--out", force=args.force)
    store = sweep.Store(args.db, readonly=True)
    try:
        limits.require_count(store.count(), f"--db {args.db}: its stored results")  # before loading
        rows = store.rows()
    finally:
        store.close()
    if any(r["variant"] == STORE_KIND for r in rows):
        raise ValueError(f"--db {args.db} holds the runs of fedbound reproduce, not a sweep's "
                         "results: rerun fedbound reproduce with --db to read them")
    out = report.write_sweep(rows, args.out, force=args.force)
    if args.json:
        return {"rows": len(rows), "report": str(out / "index.html")}
    print(f"{len(rows)} stored results -> {out / 'index.html'}")
    return None


def sweep_arguments(p) -> None:
    p.add_argument("spec", help="sweep spec JSON file")
    p.add_argument("--db", default="fedbound.sqlite", help="SQLite store (default fedbound.sqlite)")
    p.add_argument("--jobs", type=count, help="local worker processes (default: every core)")
    cluster_arguments(p, "this sweep")


def report_arguments(p) -> None:
    p.add_argument("--db", default="fedbound.sqlite", help="SQLite store of a sweep")
    p.add_argument("--out", default="sweep-report", help="report directory: new, empty, or a "
                   "previous fedbound report")
    p.add_argument("--force", action="store_true",
                   help="write the report into a directory that holds other files")


COMMANDS = (
    Command("sweep", run_sweep, "run a sweep spec into an SQLite store (resumable)",
            sweep_arguments, "fedbound sweep spec.json --db sweep.sqlite --jobs 2",
            exits={0: "every scenario of the spec is stored",
                   4: "finished, but some scenarios ended in an error (stored as such)"},
            limits=("memory", "steps", "scenarios")),
    Command("report", run_report, "plots and tables of a sweep's store", report_arguments,
            "fedbound report --db sweep.sqlite --out sweep-report",
            exits={0: "the report was written"}),
)

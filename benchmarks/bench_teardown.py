"""Signals at random moments: no process of fedbound's outlives the interrupted command's one
line by more than 2 s (issue 42, items 1 and 4).

    python benchmarks/bench_teardown.py [--runs N] [--seed S] [--load K]

Each run starts one of :data:`COMMANDS` (commands that start a fork server and pool workers
and run for longer than the window) in a session of its own, with SIGINT at its default,
and at a moment drawn uniformly in [0.001, 12] s after its start sends SIGINT to its process
group (a terminal's Ctrl-C) or SIGTERM to the command (``kill``), alternately. It reads the
command's standard error to its first line, then watches the session's processes (its fork
server, pool workers, multiprocessing's resource tracker) until none is left. A run is clean
when the command exits 130 with its one line ``fedbound: interrupted...`` and nothing else,
and the last process of the session is gone within :data:`GONE` s of that line. A signal
that lands while the interpreter starts, before fedbound's first instruction, ends the
process by the signal, or in Python's own "Fatal Python error" when it interrupts the
import of ``site`` (no line: nothing of fedbound's runs yet, and nothing of it is left);
such runs are counted apart. ``--load K`` keeps K busy processes running meanwhile (default 2).

It also interrupts, ``--runs`` / 10 times (at least 3), ``fedbound list`` with a plugin that
hangs while it imports, right after the plugin says it has started, and records the
seconds from the Ctrl-C to the command's exit (goal: at most 2 s).

Writes the figures to benchmarks/results.json. ``tests/test_reliability_teardown.py`` runs a
handful of such moments in the suite, with these helpers.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.load import arguments, busy  # noqa: E402
from benchmarks.results import figure, record  # noqa: E402

CPU_ONLY = "it interrupts the fedbound command and watches its processes"

#: commands that start a fork server and workers and run for longer than the window
COMMANDS = (["reproduce", "hfl", "--quick", "--jobs", "2"],
            ["check", "--all", "--jobs", "2", "--only", "mllsgd.theorem1,hfl.theorem2",
             "--battery", "2000", "--no-figures", "--report", "{dir}/report"])
#: the window of moments, seconds after the start
EARLIEST, LATEST = 0.001, 12.0
#: seconds within which the last process of an interrupted command must be gone
GONE = 2.0
#: seconds after which a command or a process that has not ended is hung
CEILING = 300.0

#: a plugin that hangs while it imports (it says so on standard output first)
HANGING = textwrap.dedent("""
    import sys, time
    print("importing", flush=True)
    for _ in range(6000):  # 300 s at most: the import is never let to finish
        time.sleep(0.05)
    print("finished", flush=True)
""")


def members(session: int) -> list[tuple[int, str]]:
    """(pid, command line) of the live processes of ``session`` (zombies left out: a process
    that has ended and waits for its parent to collect its status; and a process in the
    middle of its exit, its memory and so its command line already released: the state it
    shows is still "R" or "S" for an instant, and tests/test_reliability_signals.py saw it as
    a live member with the command line '' in 2 of 13 runs)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            if int(fields[3]) != session or fields[0] == "Z":
                continue
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, IndexError, ValueError):
            continue
        if cmd.strip():
            out.append((int(entry), cmd.strip()))
    return out


def start(argv: list[str], env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.Popen:
    """``python -m fedbound argv`` in a session of its own (its process group is the session),
    SIGINT at its default whatever this process inherited, text pipes for its output."""
    return subprocess.Popen([sys.executable, "-m", "fedbound", *argv], cwd=cwd, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def send(proc: subprocess.Popen, signum: int) -> None:
    """SIGINT to the command's process group, as a terminal's Ctrl-C; SIGTERM to the command
    alone, as ``kill`` does."""
    with contextlib.suppress(ProcessLookupError):
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signum)
        else:
            os.kill(proc.pid, signum)


def wait_until(condition, ceiling: float = CEILING, step: float = 0.01) -> bool:
    """Whether ``condition()`` came true within ``ceiling`` seconds (polled every ``step``)."""
    deadline = time.monotonic() + ceiling
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(step)
    return True


def kill_session(session: int) -> None:
    """SIGKILL to whatever is left of ``session`` (a failed run's leftovers)."""
    for pid, _ in members(session):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def interrupted_run(argv: list[str], after: float, signum: int) -> dict:
    """One run: the command interrupted ``after`` seconds after its start (module docstring)."""
    proc = start(argv)
    try:
        time.sleep(after)
        send(proc, signum)
        first = proc.stderr.readline()
        line_at = time.monotonic()
        rest = proc.stderr.read()
        proc.wait(CEILING)
        wait_until(lambda: not members(proc.pid), CEILING)
        return {"after": after, "code": proc.returncode, "line": first.strip(),
                "rest": rest.strip(), "gone": time.monotonic() - line_at}
    finally:
        kill_session(proc.pid)
        proc.communicate()


def before_fedbound(run: dict) -> bool:
    """Whether the signal of ``run`` landed while the interpreter started, before fedbound's
    first instruction: no line of fedbound's and no frame of its code in what the process
    wrote (it ended by the signal, or in Python's own "Fatal Python error" when the signal
    interrupted the import of ``site``)."""
    text = f"{run['line']}\n{run['rest']}"
    return run["code"] != 130 and "fedbound:" not in text and not any(
        f"/{part}/" in text for part in ("fedbound", "verify", "bounds", "sim"))


def hanging_import(tmp: Path) -> float:
    """Seconds from the Ctrl-C to the exit of ``fedbound list`` whose plugin hangs while it
    imports (-1 when it did not end in the one line and 130)."""
    (tmp / "fedbound_hangs.py").write_text(HANGING)
    proc = start(["list"], env={"PYTHONPATH": os.pathsep.join([str(tmp), str(ROOT)]),
                                "FEDBOUND_PLUGINS": "fedbound_hangs"})
    try:
        assert proc.stdout.readline() == "importing\n"
        sent = time.monotonic()
        send(proc, signal.SIGINT)
        err = proc.stderr.read()
        proc.wait(CEILING)
        seconds = time.monotonic() - sent
        return seconds if (proc.returncode, err) == (130, "fedbound: interrupted\n") else -1.0
    finally:
        kill_session(proc.pid)
        proc.communicate()


def main(argv: list[str] | None = None) -> None:
    args = arguments(__doc__, 50, CPU_ONLY, argv)
    draw = random.Random(args.seed)
    runs, hangs = [], []
    with busy(args.load), tempfile.TemporaryDirectory() as tmp:
        for i in range(args.runs):
            command = [a.replace("{dir}", f"{tmp}/{i}") for a in COMMANDS[i % len(COMMANDS)]]
            signum = (signal.SIGINT, signal.SIGTERM)[(i // len(COMMANDS)) % 2]
            r = interrupted_run(command, draw.uniform(EARLIEST, LATEST), signum)
            r["started"] = not before_fedbound(r)
            r["clean"] = (r["code"], r["rest"]) == (130, "") and r["line"].startswith(
                "fedbound: interrupted") and r["gone"] <= GONE
            runs.append(r)
            print(f"run {i} ({' '.join(command[:2])}, {signal.Signals(signum).name} at "
                  f"{r['after']:.3f} s): exit {r['code']}, last process gone {r['gone']:.2f} s "
                  f"after the line" + ("" if r["clean"] or not r["started"] else f": {r}"),
                  file=sys.stderr)
        for _ in range(max(3, args.runs // 10)):
            hangs.append(hanging_import(Path(tmp)))
    started = [r for r in runs if r["started"]]
    bad = sum(not r["clean"] for r in started)
    slowest = max((r["gone"] for r in started), default=0.0)
    print(f"{len(runs)} signals at {EARLIEST}-{LATEST} s under {args.load} busy processes: "
          f"{len(runs) - len(started)} landed before fedbound's first instruction (ended by the "
          f"signal, no line), {len(started) - bad} of {len(started)} others clean; the last process "
          f"gone at most {slowest:.2f} s after the line; hanging plugin import: "
          f"{', '.join(f'{s:.2f}' for s in hangs)} s from Ctrl-C to exit")
    record([figure("teardown: interrupted runs with a process left 2 s after the line, or not "
                   "ending in one line and 130", bad, "runs", at_most=0),
            figure("teardown: signals at random moments", len(runs), "runs"),
            figure("teardown: signals that landed before fedbound's first instruction",
                   len(runs) - len(started), "runs"),
            figure("teardown: last process of an interrupted command gone after its line (worst)",
                   slowest, "s", at_most=GONE),
            figure("teardown: hanging plugin import, Ctrl-C to exit 130 (worst)",
                   max(hangs) if min(hangs) >= 0 else float(CEILING), "s", at_most=GONE)])


if __name__ == "__main__":
    main()

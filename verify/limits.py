"""Resource limits: what one scenario, one search and one sweep may use, checked before any
work starts.

An adapter estimates the :class:`Footprint` of a scenario from its sizes (the hook
``Adapter._footprint``): the peak memory of the simulator's buffers, the parameter
derivation and the trace, and the work in elementary operations. :func:`require` compares
it with the limits and refuses, with one line naming the fields and the estimate, before
anything is allocated. The limits are process-wide settings held in environment variables,
so that worker processes (local pools, a Dask ``LocalCluster``) inherit them:

==========================  =====================================================  ===============
variable                    limit                                                  option
==========================  =====================================================  ===============
``FEDBOUND_MAX_MEMORY``     bytes one scenario may use ("8G", "512M", "1.5GiB");   --max-memory
                            default: ``MEMORY_FRACTION`` of the machine's
                            memory (:func:`physical_memory`: its total,
                            or its container's limit when smaller)
``FEDBOUND_MAX_STEPS``      elementary operations of one scenario (default         --max-steps
                            ``DEFAULT_MAX_STEPS``, a few hours of one core)
``FEDBOUND_MAX_SCENARIOS``  scenarios of one sweep, search budget or battery, or   --max-scenarios
                            runs of a chooser's grid or a rate's sweep (default
                            ``DEFAULT_MAX_SCENARIOS``)
``FEDBOUND_MAX_INPUT``      bytes of one input read from a file or standard input  --max-input
                            (default ``DEFAULT_MAX_INPUT``; ``verify.inputs``)
==========================  =====================================================  ===============

A command that runs several scenarios at once (a chooser's grid of candidates, a rate's
sweep, a reproduction) asks :func:`require_runs` before the first: each run within the
memory and the step limits, their number within the scenario limit.

The estimates are deliberately simple (the product of the sizes of each buffer, summed);
``tests/test_limits.py`` holds them within a small factor of the measured peak memory.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass

#: share of the machine's memory (:func:`physical_memory`) one scenario may use by default
MEMORY_FRACTION = 0.5
#: elementary operations of one scenario by default (about 3 hours at 1e9 per second)
DEFAULT_MAX_STEPS = 10**13
#: scenarios of one sweep, or checks of one search, by default
DEFAULT_MAX_SCENARIOS = 10**6
#: worker processes a command may start per core of the machine (more only share the cores,
#: each with its own copy of torch)
JOBS_PER_CORE = 4
#: bytes of one input (a scenario, a sweep spec) by default
DEFAULT_MAX_INPUT = 8 * 2**20
#: each Python-level iteration of a simulator loop costs at least this many operations
#: (about 100 microseconds of tensor calls)
LOOP_OVERHEAD = 10**5

ENV = {"memory": "FEDBOUND_MAX_MEMORY", "steps": "FEDBOUND_MAX_STEPS",
       "scenarios": "FEDBOUND_MAX_SCENARIOS", "input": "FEDBOUND_MAX_INPUT"}
OPTION = {"memory": "--max-memory", "steps": "--max-steps", "scenarios": "--max-scenarios",
          "input": "--max-input"}


class ResourceError(ValueError):
    """A scenario, search or sweep above a resource limit (exit status 2 in the CLI)."""


@dataclass(frozen=True)
class Footprint:
    """The estimated peak memory (``bytes``) and work (``steps``, elementary operations) of
    one scenario, with what dominates each in terms of the scenario's fields: ``what`` for
    the memory ("replicas=200 x workers=4e9 x dim=8 x 7 buffers of 8 B"), ``work`` for the
    operations. Either number may be ``inf`` (a size beyond float64)."""

    bytes: float
    steps: float
    what: str
    work: str = ""

    @classmethod
    def of(cls, memory: Mapping[str, float], steps: Mapping[str, float]) -> Footprint:
        """A footprint from its terms, each described in the scenario's fields: bytes and
        operations are the sums, ``what`` and ``work`` name the largest term of each."""
        def total(terms: Mapping[str, float]) -> tuple[float, str]:
            values = [_nonnegative(v) for v in terms.values()]
            if not values:
                return 0.0, ""
            big = max(range(len(values)), key=values.__getitem__)
            return math.fsum(values) if all(map(math.isfinite, values)) else math.inf, \
                list(terms)[big]

        b, what = total(memory)
        s, work = total(steps)
        return cls(b, s, what, work)


def _nonnegative(x) -> float:
    try:
        x = float(x)
    except OverflowError:
        return math.inf
    return math.inf if math.isnan(x) else max(x, 0.0)


def count_text(x) -> str:
    """A size for a message: exact below a million, else 3 significant digits ("4e+09")."""
    x = _nonnegative(x)
    if not math.isfinite(x):
        return "inf"
    return str(int(x)) if x < 1e6 and x == int(x) else f"{x:.3g}"


def size_text(nbytes: float) -> str:
    """Bytes in binary units: "512 B", "3.2 MiB", "29.8 GiB"."""
    x = _nonnegative(nbytes)
    if not math.isfinite(x):
        return "inf B"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if x < 1024 or unit == "PiB":
            return f"{x:.0f} {unit}" if unit == "B" else f"{x:.3g} {unit}"
        x /= 1024
    raise AssertionError("unreachable")


_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}


def parse_size(text: str, what: str) -> int:
    """Bytes from "8G", "8GB", "8GiB", "512m", "1.5T" or a plain number of bytes (units are
    binary: 1G = 2^30 bytes); ValueError naming ``what`` otherwise."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([kKmMgGtTpP]?)(?:i?[bB])?\s*",
                     str(text))
    value = float(m.group(1)) * _UNITS[m.group(2).lower()] if m else math.nan
    if not (math.isfinite(value) and value >= 1 and value == int(value)):
        raise ValueError(f"{what}={str(text)[:40]!r} must be a whole number of bytes, at least 1, "
                         "such as 8G, 512M or 1.5GiB (binary units)")
    return int(value)


def parse_count(text: str, what: str) -> int:
    """A positive integer from "1000000" or "1e6"; ValueError naming ``what`` otherwise."""
    try:
        value = float(str(text).strip())
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= 1 and value == int(value)):
        raise ValueError(f"{what}={str(text)[:40]!r} must be a positive integer, such as 1000000 or 1e6")
    return int(value)


#: files holding this machine's total memory, and a container's memory limit (cgroup v2,
#: then v1), read by :func:`physical_memory`
MEMINFO = "/proc/meminfo"
CGROUP_LIMITS = ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes")


def physical_memory() -> int | None:
    """Bytes of memory this process can have at most, whatever else runs: the machine's
    total memory (``MemTotal`` of /proc/meminfo, else ``os.sysconf``), or the memory limit
    of the container (cgroup) when that is smaller; None when the system does not say.
    Unlike the memory available at the moment, this is a setting of the machine: the same
    from one command to the next."""
    sizes = [size for size in (_meminfo_total(), *map(_cgroup_limit, CGROUP_LIMITS))
             if size is not None]
    return min(sizes) if sizes else None


def _meminfo_total() -> int | None:
    try:
        with open(MEMINFO) as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def _cgroup_limit(path: str) -> int | None:
    """The limit in a cgroup file: bytes, or None for "max", an absent or unreadable file
    (cgroup v1 writes "no limit" as a number near 2^63, larger than any memory)."""
    try:
        with open(path) as f:
            text = f.read().strip()
        return None if text == "max" else int(text)
    except (OSError, ValueError):
        return None


def _given(kind: str) -> tuple[str | None, str]:
    """(the value of the limit ``kind`` set in the environment, or None; how to name it)."""
    text = os.environ.get(ENV[kind])
    return text or None, f"{OPTION[kind]}/{ENV[kind]}={text}"


def memory_limit() -> tuple[float, str]:
    """(bytes one scenario may use, where that limit comes from)."""
    text, source = _given("memory")
    if text:
        return parse_size(text, ENV["memory"]), source
    total = physical_memory()
    if total is None:
        return math.inf, "no limit: the system does not report its memory"
    return MEMORY_FRACTION * total, (f"{MEMORY_FRACTION:.0%} of the {size_text(total)} of "
                                     f"memory; raise it with {OPTION['memory']} or {ENV['memory']}")


def _count_limit(kind: str, default: float, why: str) -> tuple[float, str]:
    """(the limit of ``kind``, where it comes from): its environment variable, else ``default``."""
    text, source = _given(kind)
    if text:
        return parse_count(text, ENV[kind]), source
    return default, f"the default {default:.0e}{why}; raise it with {OPTION[kind]} or {ENV[kind]}"


def steps_limit() -> tuple[float, str]:
    """(operations one scenario may take, where that limit comes from)."""
    return _count_limit("steps", DEFAULT_MAX_STEPS, ", hours of computing")


def scenarios_limit() -> tuple[int, str]:
    """(scenarios one sweep, or checks one search, may have, where that limit comes from)."""
    return _count_limit("scenarios", DEFAULT_MAX_SCENARIOS, "")


def input_limit() -> tuple[int, str]:
    """(bytes one input may hold, where that limit comes from): ``verify.inputs``."""
    text, source = _given("input")
    if text:
        return parse_size(text, ENV["input"]), source
    return DEFAULT_MAX_INPUT, (f"the default {size_text(DEFAULT_MAX_INPUT)}; raise it with "
                               f"{OPTION['input']} or {ENV['input']}")


def require(key: str, fp: Footprint | None, *, noun: str = "scenario") -> None:
    """Raise ResourceError, one line naming the fields and the estimate, when ``fp`` exceeds
    the memory or the step limit (None: the adapter gives no estimate, nothing to check);
    ``key`` and ``noun`` say what is refused ("mllsgd.theorem1: this scenario needs ...")."""
    if fp is None:
        return
    limit, source = memory_limit()
    if not fp.bytes <= limit:
        need = f"about {size_text(fp.bytes)} of memory" if math.isfinite(fp.bytes) else \
            "more memory than float64 can count"
        raise ResourceError(f"{key}: this {noun} needs {need} ({fp.what}), above the limit "
                            f"of {size_text(limit)} ({source})")
    limit, source = steps_limit()
    if not fp.steps <= limit:
        raise ResourceError(f"{key}: this {noun} needs about {count_text(fp.steps)} operations "
                            f"({fp.work}), above the limit of {count_text(limit)} ({source})")


def require_runs(what: str, runs: Mapping[str, Footprint | None]) -> None:
    """Raise ResourceError before the first of several runs that a command makes one after
    the other (a chooser's candidates, a rate's points, a reproduction's trainings), when
    there are more than the scenario limit or one of them exceeds the memory or the step
    limit. ``runs`` maps a label naming each run in the user's options ("--Q 20", "S = 3
    with --T 600") to its estimate (None: no estimate); ``what`` names the command
    ("choose tdcd"). The generic hook of choosers and reproductions: they call it with
    estimates from their sizes alone, before they allocate anything."""
    require_count(len(runs), f"{what}: the grid", "runs")
    for label, fp in runs.items():
        require(f"{what} ({label})", fp, noun="run")


def fitting_batches(footprints) -> list[list[int]]:
    """The indices of ``footprints`` (one per configuration of a batched simulation, a
    chooser's candidates: one batched run holds the memory of all of them and does the work
    of all) cut, in order, into groups whose summed bytes and summed operations stay within
    the memory and step limits (:func:`memory_limit`, :func:`steps_limit`): one batched run
    per group, where one run for all would not fit. An item above a limit is a group of its
    own (for :func:`require` to refuse)."""
    limits = (memory_limit()[0], steps_limit()[0])
    groups: list[list[int]] = []
    total = (math.inf, math.inf)
    for i, fp in enumerate(footprints):
        size = (_nonnegative(fp.bytes), _nonnegative(fp.steps))
        if not groups or not all(t + s <= limit for t, s, limit in zip(total, size, limits,
                                                                       strict=True)):
            groups.append([])
            total = (0.0, 0.0)
        groups[-1].append(i)
        total = (total[0] + size[0], total[1] + size[1])
    return groups


def require_count(count: float, what: str, noun: str = "scenarios") -> None:
    """Raise ResourceError when ``count`` scenarios (of a sweep, a search budget, a battery,
    ``noun``: the runs of a grid) exceed the limit; ``what`` says what is counted, in the
    user's terms ("--battery 100000000000 x 5 results")."""
    limit, source = scenarios_limit()
    if not count <= limit:
        raise ResourceError(f"{what} = {count_text(count)} {noun}, above the limit of "
                            f"{count_text(limit)} ({source})")


def require_jobs(jobs: int, option: str) -> None:
    """Raise ResourceError when ``jobs`` worker processes (``option``: --jobs, --dask-local)
    exceed :data:`JOBS_PER_CORE` per core of this machine: before any is started."""
    cores = os.cpu_count() or 1
    if jobs > JOBS_PER_CORE * cores:
        raise ResourceError(f"{option} {jobs}: at most {JOBS_PER_CORE} worker processes per core, "
                            f"{JOBS_PER_CORE * cores} on this machine's {cores} cores (more only "
                            "share the cores, each with a copy of the simulator in memory)")


@contextmanager
def configured(*, memory: str | None = None, steps: str | None = None,
               scenarios: str | None = None, input: str | None = None) -> Iterator[None]:
    """Set the limits given (the CLI's options) for the duration of the block, in the
    environment so that worker processes started inside it inherit them; each value is
    validated first (ValueError naming the option)."""
    given = {"memory": memory, "steps": steps, "scenarios": scenarios, "input": input}
    for name, value in given.items():
        if value is not None:
            (parse_size if name in ("memory", "input") else parse_count)(value, OPTION[name])
    saved = {name: os.environ.get(ENV[name]) for name in given}
    try:
        for name, value in given.items():
            if value is not None:
                os.environ[ENV[name]] = str(value)
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(ENV[name], None)
            else:
                os.environ[ENV[name]] = value

"""Hypothesis profiles. Under CI (the ``CI`` environment variable, which ``.ci/run`` sets)
the "ci" profile derandomizes hypothesis: every run draws the same examples, so a
submission's CI result does not depend on the luck of the draw. Local runs explore new
examples each time (and keep failures in .hypothesis/). Neither profile has a deadline: an
example's wall time depends on the machine's load, and a test waits on results, never on
the clock (``tests/test_ceilings.py``).

The generated numeric functions (``bounds.compiled``) are cached in a temporary directory
for the session, never in the user's own cache directory."""

import os
import shutil
import signal
import tempfile

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True, deadline=None)
settings.register_profile("local", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "local")

#: one thread per process, for this process and every command, notebook kernel and worker the
#: tests start (they inherit the environment): pytest-xdist runs a worker per core, and a
#: process whose OpenMP threads outnumber the cores left to it spins for them (two ``fedbound
#: sweep`` drivers at torch's default of a thread per core took 131 s on 2 cores, against 10 s
#: at one thread each). A value the caller set is kept.
THREAD_CAPS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
for _name in THREAD_CAPS:
    os.environ.setdefault(_name, "1")

#: Ctrl-C deliverable in every command the tests start, whatever this process inherited: a
#: shell without job control starts a background job (``.ci/run ... &``) with SIGINT ignored,
#: every process inherits that through exec, and the tests that interrupt a command saw it
#: finish (exit 0) instead of answering 130. A Python handler here is reset to the default
#: in each process started from this one, and Python installs its own there.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)

_CACHE = tempfile.mkdtemp(prefix="fedbound-test-cache-")
os.environ["XDG_CACHE_HOME"] = _CACHE  # subprocesses of the tests inherit it


def pytest_unconfigure(config):
    shutil.rmtree(_CACHE, ignore_errors=True)

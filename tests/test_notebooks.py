"""Every notebook in notebooks/ executes top to bottom, and says what it should.

Each notebook runs in a fresh ``python3`` kernel whose interpreter is the one running
pytest (so the project's virtualenv, never whatever ``python3`` kernelspec a user or
system Jupyter directory happens to hold), with ``MPLBACKEND=Agg`` and the notebooks
folder as working directory, the way Jupyter opens them. A failing cell fails the test
with that cell's source and traceback.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
from jupyter_client.kernelspec import KernelSpecManager  # noqa: E402
from jupyter_client.manager import AsyncKernelManager  # noqa: E402
from nbclient.exceptions import CellExecutionError  # noqa: E402

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
CELL_TIMEOUT = 600  # seconds per cell
KERNEL = "python3"

#: Output that a notebook must print (regular expressions searched in its text outputs),
#: beyond executing without an error. Every notebook ends with a cell asserting its claims
#: and printing "ALL n CHECKS PASSED"; some must print more.
ALL_PASSED = r"ALL \d+ CHECKS PASSED"
EXPECTED = {
    "01_mllsgd.ipynb": [r"\| mllsgd\.theorem1 \|"],
    "02_hfl_sync_time.ipynb": [r"\| hfl\.theorem2 \|"],
}

PROBE = "import os, sys\nprint('KERNEL-PROBE', sys.executable, os.environ.get('MPLBACKEND'))"


@pytest.fixture(scope="module")
def kernel_specs(tmp_path_factory) -> KernelSpecManager:
    """A spec manager that knows only one ``python3`` kernel: this interpreter, Agg backend."""
    root = tmp_path_factory.mktemp("kernels")
    spec_dir = root / KERNEL
    spec_dir.mkdir()
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (test)",
        "language": "python",
        "env": {"MPLBACKEND": "Agg"},
    }
    (spec_dir / "kernel.json").write_text(json.dumps(spec))
    return KernelSpecManager(kernel_dirs=[str(root)])


def _text_outputs(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif "data" in out:
            data = out["data"]
            parts.append(data.get("text/markdown", "") or data.get("text/plain", ""))
    return "".join(parts)


def test_there_are_notebooks():
    assert NOTEBOOKS, f"no notebooks found in {NOTEBOOK_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stored_clean(path):
    """Stored without outputs, with the python3 kernelspec."""
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.metadata.get("kernelspec", {}).get("name") == KERNEL
    dirty = [i for i, c in enumerate(nb.cells)
             if c.cell_type == "code" and (c.get("outputs") or c.get("execution_count"))]
    assert not dirty, f"{path.name}: cells {dirty} are stored with outputs"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path, kernel_specs):
    nb = nbformat.read(path, as_version=4)
    n_code = sum(c.cell_type == "code" for c in nb.cells)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))  # throwaway: which interpreter ran it
    km = AsyncKernelManager(kernel_name=KERNEL, kernel_spec_manager=kernel_specs)
    client = nbclient.NotebookClient(
        nb, km=km, kernel_name=KERNEL, timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(path.parent)}},
    )
    failure = None
    try:
        client.execute()
    except CellExecutionError as err:
        failure = str(err)  # the cell's source and traceback
    if failure is not None:
        pytest.fail(f"{path.name}: a cell raised\n{failure}", pytrace=False)

    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, n_code + 2)), \
        f"{path.name}: not every code cell ran, in order"
    errors = [o for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, f"{path.name}: error outputs {[(e.ename, e.evalue) for e in errors]}"

    probe = _text_outputs(code[-1]).split()
    assert probe[:3] == ["KERNEL-PROBE", sys.executable, "Agg"], \
        f"{path.name}: kernel ran {probe[1:]} instead of {sys.executable} with Agg"

    text = "\n".join(_text_outputs(c) for c in code[:-1])
    for pattern in [ALL_PASSED, *EXPECTED.get(path.name, [])]:
        assert re.search(pattern, text), f"{path.name}: no output matches {pattern!r}"

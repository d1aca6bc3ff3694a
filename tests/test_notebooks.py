"""Every notebook in notebooks/ is stored executed, executes top to bottom, says what it
should, and its stored outputs are the ones it produces now.

Execution uses ``notebooks/execute.py`` (what ``make notebooks`` runs): a fresh ``python3``
kernel whose interpreter is the one running pytest (so the project's virtualenv, never whatever
``python3`` kernelspec a user or system Jupyter directory happens to hold), ``MPLBACKEND=Agg``
and the notebooks folder as working directory, the way Jupyter opens them. A failing cell fails
the test with that cell's source and traceback.

Stored outputs cannot go stale: after execution, :func:`differences` compares every code cell's
outputs with the stored ones. The text of each output (stdout, stderr, and each text mimetype:
``text/plain``, ``text/html``, ``text/markdown``, ``text/latex``) must be the same once its numbers
are taken out, and each number must equal the stored one to a relative tolerance of 1e-9.
Why not exactly: fedbound promises the same numbers bit for bit for the same seed *on the same
machine*, but the stored outputs are compared on whatever machine runs the tests, where another
BLAS or CPU vector width can change the last bits of a float64 reduction; relative round-off of
1e-16 per operation, grown through the few thousand iterations of a notebook's runs, stays
orders of magnitude below 1e-9, while any change of a printed result in its first 9 significant
digits (every number the notebooks print has fewer) is reported. Numbers within 1e-12 of zero
are round-off residues (a notebook prints a few, e.g. |computed - closed form|) and are compared
absolutely. Figures are compared by presence (an ``image/png`` output in the same cell), not by
their bytes, which depend on matplotlib's version and fonts. Cells tagged ``nondeterministic``
(timings, temporary paths) are executed but not compared.

Under CI (the ``CI`` variable that ``.ci/run`` sets) the notebook packages are required: a
test that skipped there would let a stale notebook land. A seeded result does not depend on
the machine that computes it (``tests/test_determinism.py``), so the stored outputs are
those of any machine.
"""

from __future__ import annotations

import copy
import importlib.util
import math
import os
import re
import sys
from itertools import zip_longest
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

if os.environ.get("CI"):  # CI must execute the notebooks: a missing package fails it there
    import ipykernel  # noqa: F401
    import nbclient  # noqa: F401
    import nbformat
else:
    nbformat = pytest.importorskip("nbformat")
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
from nbclient.exceptions import CellExecutionError  # noqa: E402

NOTEBOOK_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
_spec = importlib.util.spec_from_file_location("notebooks_execute", NOTEBOOK_DIR / "execute.py")
execute_py = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(execute_py)

#: Output that a notebook must print (regular expressions searched in its text outputs),
#: beyond executing without an error. Every notebook ends with a cell asserting its claims
#: and printing "ALL n CHECKS PASSED"; some must print more.
ALL_PASSED = r"ALL \d+ CHECKS PASSED"
EXPECTED = {
    "01_mllsgd.ipynb": [r"<td>mllsgd\.theorem1</td>"],
    "02_hfl_sync_time.ipynb": [r"<td>hfl\.theorem2</td>"],
}
NONDETERMINISTIC = "nondeterministic"
REL_TOL, ABS_TOL = 1e-9, 1e-12
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?|[-+]?\b(?:inf|nan)\b")
#: A cell that draws a figure calls one of these.
DRAWS = re.compile(r"plt\.(?:subplots|figure)\(|\bplot\w*\(|\.against\(")

PROBE = "import os, sys\nprint('KERNEL-PROBE', sys.executable, os.environ.get('MPLBACKEND'))"


@pytest.fixture(scope="module")
def kernel_specs():
    with execute_py.kernel_specs() as specs:
        yield specs


def _text_outputs(cell) -> str:
    parts = []
    for out in cell.get("outputs", []):
        if out.get("output_type") == "stream":
            parts.append(out.get("text", ""))
        elif "data" in out:
            data = out["data"]
            parts.append(data.get("text/html", "") or data.get("text/markdown", "")
                         or data.get("text/plain", ""))
    return "".join(parts)


def _comparable(cell) -> list[tuple[str, str | None]]:
    """A code cell's outputs as (kind, text): consecutive stream outputs of one stream joined
    (how a kernel splits a stream into messages varies), each text mimetype of a result or
    display in order, an image as its mimetype with text None, an error as its name and value."""
    items: list[tuple[str, str | None]] = []
    for out in cell.get("outputs", []):
        kind = out["output_type"]
        if kind == "stream":
            name = f"stream {out['name']}"
            if items and items[-1][0] == name:
                items[-1] = (name, items[-1][1] + out["text"])
            else:
                items.append((name, out["text"]))
        elif kind == "error":
            items.append(("error", f"{out['ename']}: {out['evalue']}"))
        else:
            for mime in sorted(out.get("data", {})):
                value = out["data"][mime]
                items.append((mime, None if mime.startswith("image/") else str(value)))
    return items


def _same(stored: str, now: str) -> bool:
    a, b = float(stored), float(now)
    return (math.isnan(a) and math.isnan(b)) or math.isclose(a, b, rel_tol=REL_TOL, abs_tol=ABS_TOL)


def _first_difference(stored: str, now: str) -> str:
    """The first line where two texts differ, stored then now."""
    for a, b in zip_longest(stored.splitlines(), now.splitlines(), fillvalue=""):
        if a != b:
            return f"stored {a!r}, now {b!r}"
    return "same lines, different line endings"


def _text_differences(where: str, stored: str, now: str) -> list[str]:
    """Where two output texts differ: in their text outside numbers, or in a number."""
    if NUMBER.sub("#", stored) != NUMBER.sub("#", now):
        return [f"{where}: the text differs: {_first_difference(stored, now)}"]
    return [f"{where}: stored {a.group()}, now {b.group()}"
            for a, b in zip(NUMBER.finditer(stored), NUMBER.finditer(now), strict=True)
            if not _same(a.group(), b.group())]


def differences(stored, now) -> list[str]:
    """Each difference between the outputs of the notebook ``stored`` and the same notebook
    executed again, ``now``, naming the cell (its index in the notebook) and the two values;
    cells tagged "nondeterministic" are skipped (module docstring)."""
    if [c.source for c in stored.cells] != [c.source for c in now.cells]:
        return ["the notebooks' cells differ: compare one notebook with itself, executed again"]
    found = []
    for index, (s, n) in enumerate(zip(stored.cells, now.cells, strict=True)):
        if s.cell_type != "code" or NONDETERMINISTIC in s.metadata.get("tags", []):
            continue
        a, b = _comparable(s), _comparable(n)
        if [kind for kind, _ in a] != [kind for kind, _ in b]:
            found.append(f"cell {index}: stored outputs {[k for k, _ in a]}, now {[k for k, _ in b]}")
            continue
        for (kind, x), (_, y) in zip(a, b, strict=True):
            if x is not None:
                found += _text_differences(f"cell {index} ({kind})", x, y)
    return found


def _stored(path: Path):
    return nbformat.read(path, as_version=4)


def test_there_are_notebooks():
    assert NOTEBOOKS, f"no notebooks found in {NOTEBOOK_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_is_stored_executed(path):
    """Stored with the python3 kernelspec, executed top to bottom without an error, without
    run-to-run metadata (`make notebooks` writes it so)."""
    nb = _stored(path)
    nbformat.validate(nb)
    assert nb.metadata.get("kernelspec", {}).get("name") == execute_py.KERNEL
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), \
        f"{path.name}: not stored executed top to bottom: run `make notebooks`"
    errors = [(i, o.ename) for i, c in enumerate(nb.cells) for o in c.get("outputs", [])
              if o.output_type == "error"]
    assert not errors, f"{path.name}: stored with errors {errors}"
    timed = [i for i, c in enumerate(nb.cells) if "execution" in c.metadata]
    assert not timed and "widgets" not in nb.metadata, \
        f"{path.name}: stored with execution timings (cells {timed}) or widget state"
    assert re.search(ALL_PASSED, "\n".join(_text_outputs(c) for c in code))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_figures_are_stored(path):
    """A cell that draws a figure is stored with an image/png output (re-execution must then
    give one too: test_notebook_executes)."""
    nb = _stored(path)
    missing = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and DRAWS.search(c.source)
               and not any("image/png" in o.get("data", {}) for o in c.outputs)]
    assert not missing, f"{path.name}: cells {missing} draw a figure but store no image/png"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_html_rendering_is_stored(path):
    """notebooks/html/<stem>.html exists (the report links it), shows the stored result, loads
    nothing from the network (no script or style from elsewhere) and holds its math as
    MathML: as many formulas as the notebook's markdown and LaTeX outputs have."""
    html = execute_py.HTML_DIR / f"{path.stem}.html"
    assert html.is_file(), f"{html} is missing: run `make notebooks`"
    page = html.read_text(encoding="utf-8")
    final = re.findall(ALL_PASSED, "\n".join(_text_outputs(c) for c in _stored(path).cells))
    assert final[-1] in page, f"{html.name} does not show the stored {final[-1]!r}: run `make notebooks`"
    assert not re.search(r"<(script|link)[^>]*(src|href)=[\"']?(https?:)?//", page), \
        f"{html.name} loads something from the network"
    assert f'href="{execute_py.STYLESHEET}"' in page
    assert (execute_py.HTML_DIR / execute_py.STYLESHEET).is_file()
    stored = _stored(path)
    formulas = sum(len(execute_py.DISPLAY_MATH.findall(c.source))
                   + len(execute_py.INLINE_MATH.findall(execute_py.DISPLAY_MATH.sub("", c.source)))
                   for c in stored.cells if c.cell_type == "markdown")
    formulas += sum("text/latex" in o.get("data", {}) and "text/html" not in o.get("data", {})
                    for c in stored.cells for o in c.get("outputs", []))
    assert page.count("<math") == formulas, "run `make notebooks`"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes(path, kernel_specs):
    stored = _stored(path)
    nb = copy.deepcopy(stored)
    n_code = sum(c.cell_type == "code" for c in nb.cells)
    nb.cells.append(nbformat.v4.new_code_cell(PROBE))  # throwaway: which interpreter ran it
    failure = None
    try:
        execute_py.execute(nb, kernel_specs, path.parent)
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

    nb.cells.pop()
    stale = differences(stored, nb)
    assert not stale, (f"{path.name}: stored outputs differ from a new execution (run "
                       "`make notebooks` and review the diff):\n" + "\n".join(stale))


# ------------------------------------------------------------ the comparison itself

def _notebook(*texts: str, tags=()):
    """A notebook of one code cell per text, the cell ``print(text_i)`` with that text as its
    stored output: the same cells whatever the texts."""
    nb = nbformat.v4.new_notebook()
    for i, text in enumerate(texts, start=1):
        cell = nbformat.v4.new_code_cell(f"print(text_{i})", execution_count=i)
        cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=text)]
        if tags:
            cell.metadata["tags"] = list(tags)
        nb.cells.append(cell)
    return nb


def test_differences_report_an_edited_stored_number():
    """One number edited in a copy of a stored notebook: reported with its cell and both values."""
    stored = _stored(NOTEBOOK_DIR / "01_mllsgd.ipynb")
    edited = copy.deepcopy(stored)
    index, out, match = next(
        (i, o, m) for i, c in enumerate(edited.cells)
        if c.cell_type == "code" and NONDETERMINISTIC not in c.metadata.get("tags", [])
        for o in c.outputs if o.output_type == "stream"
        for m in NUMBER.finditer(o.text) if "." in m.group())
    new = repr(float(match.group()) * (1 + 1e-6))
    out.text = out.text[:match.start()] + new + out.text[match.end():]
    assert differences(stored, stored) == []
    assert differences(stored, edited) == [f"cell {index} (stream stdout): stored {match.group()}, now {new}"]


@given(st.floats(min_value=1e-4, max_value=1e300) | st.floats(min_value=-1e300, max_value=-1e-4),
       st.sampled_from([1e-7, 1e-6, 1e-3, 1.0]))
def test_differences_report_a_number_beyond_the_tolerance(x, rel):
    stored, now = _notebook(f"bound {x!r} holds"), _notebook(f"bound {x * (1 + rel)!r} holds")
    assert differences(stored, now) == [f"cell 0 (stream stdout): stored {x!r}, now {x * (1 + rel)!r}"]


@given(st.floats(min_value=-1e300, max_value=1e300), st.sampled_from([0.0, 1e-15, 1e-12, -1e-11]))
def test_differences_accept_round_off(x, rel):
    assert differences(_notebook(f"bound {x!r} holds"), _notebook(f"bound {x * (1 + rel)!r} holds")) == []


def test_differences_report_text_images_and_skip_tagged_cells():
    assert differences(_notebook("verdict holds, 1 s"), _notebook("verdict violated, 1 s")) == [
        "cell 0 (stream stdout): the text differs: stored 'verdict holds, 1 s', now 'verdict violated, 1 s'"]
    assert differences(_notebook("took 1.5 s", tags=[NONDETERMINISTIC]),
                       _notebook("took 2.5 s", tags=[NONDETERMINISTIC])) == []
    stored, now = _notebook("figure"), _notebook("figure")
    stored.cells[0].outputs.append(nbformat.v4.new_output(
        "display_data",
        data={"image/png": "iVBORw0KGgo=", "text/plain": "<Figure size 600x400 with 1 Axes>"}))
    assert differences(stored, now) == [
        "cell 0: stored outputs ['stream stdout', 'image/png', 'text/plain'], now ['stream stdout']"]
    assert differences(stored, _notebook("figure", "a second cell")) == [
        "the notebooks' cells differ: compare one notebook with itself, executed again"]


#: an axis label a notebook's code writes as a literal: ``set_xlabel("...")``, ``ylabel="..."``
LITERAL_LABEL = re.compile(r"""(?:set_[xy]label\(|\b[xy]label=)\s*r?f?r?(["'])(.*?)\1""")
#: axes of categories (one tick per result or configuration), which have no unit
CATEGORY_AXES = {"registered result (default variant)", "configuration"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_every_axis_a_notebook_labels_states_its_unit(path):
    """Each axis label written in a notebook's code ends with a unit of ``verify.plots.UNITS``
    in brackets (``"iteration k [count]"``), as the report's figures do; an axis of
    categories is the exception."""
    from fedbound.verify.plots import UNITS

    code = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells
                     if c.cell_type == "code")
    labels = [m[2] for m in LITERAL_LABEL.finditer(code)]
    bad = [text for text in labels if text not in CATEGORY_AXES
           and (re.search(r"\[([^\[\]]+)\]$", text) or [None, None])[1] not in UNITS]
    assert bad == [], path.name


def test_the_label_finder_sees_a_label_without_unit():
    found = [m[2] for m in LITERAL_LABEL.finditer(
        'ax.set_xlabel("step"); ax.set(ylabel=r"$x$ [loss]"); ax.set_ylabel(f"n [count]")')]
    assert found == ["step", "$x$ [loss]", "n [count]"]

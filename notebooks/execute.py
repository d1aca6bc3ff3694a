"""Execute fedbound's notebooks in place, with their outputs, and render each to static HTML.

``make notebooks`` runs this script. Each notebook runs top to bottom in a fresh ``python3``
kernel whose interpreter is the one running this script (never whatever ``python3`` kernelspec
a user or system Jupyter directory holds), with ``MPLBACKEND=Agg`` and the notebooks folder as
working directory, the way Jupyter opens them; ``tests/test_notebooks.py`` executes them with
the same set-up and compares their outputs with the stored ones. The notebook is stored with
its outputs and without what changes from one run to the next without meaning anything
(execution timing metadata, widget state), so that executing it again gives a clean diff.
``html/<stem>.html`` next to the notebooks is its static HTML rendering (nbconvert's ``lab``
template), which ``fedbound check --all --report`` links, with the template's stylesheet in
one file beside them (``html/notebook.css``). The rendering makes no external request: its
math is MathML (latex2mathml: ``$...$`` and ``$$...$$`` in markdown cells, and
``text/latex`` outputs such as a theorem's statement), which browsers lay out natively, and
the template's scripts from a CDN (require.js, MathJax, Mermaid) are left out.

    python notebooks/execute.py                    # every notebook
    python notebooks/execute.py 02_hfl_sync_time   # the named ones (stem or file name)
"""

from __future__ import annotations

import argparse
import copy
import json
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nbformat
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import AsyncKernelManager
from nbclient import NotebookClient

NOTEBOOK_DIR = Path(__file__).resolve().parent
HTML_DIR = NOTEBOOK_DIR / "html"
KERNEL = "python3"
CELL_TIMEOUT = 600  # seconds per cell
HTML_TEMPLATE = "lab"


def notebooks() -> list[Path]:
    """Every notebook of the notebooks folder, in order."""
    return sorted(NOTEBOOK_DIR.glob("*.ipynb"))


@contextmanager
def kernel_specs() -> Iterator[KernelSpecManager]:
    """A kernelspec manager that knows one ``python3`` kernel only: this interpreter, Agg."""
    with tempfile.TemporaryDirectory(prefix="fedbound-kernels-") as root:
        spec_dir = Path(root) / KERNEL
        spec_dir.mkdir()
        spec = {
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (fedbound)",
            "language": "python",
            "env": {"MPLBACKEND": "Agg"},
        }
        (spec_dir / "kernel.json").write_text(json.dumps(spec))
        yield KernelSpecManager(kernel_dirs=[root])


def execute(nb: nbformat.NotebookNode, specs: KernelSpecManager,
            cwd: Path = NOTEBOOK_DIR) -> nbformat.NotebookNode:
    """Execute ``nb`` in place in a fresh kernel of ``specs`` with working directory ``cwd``.

    A cell that raises raises ``nbclient.exceptions.CellExecutionError`` (its source and
    traceback). The kernel is shut down either way (nbclient leaves a kernel manager it was
    given running: in a test session each notebook's kernel would live until the end)."""
    km = AsyncKernelManager(kernel_name=KERNEL, kernel_spec_manager=specs)
    client = NotebookClient(nb, km=km, kernel_name=KERNEL, timeout=CELL_TIMEOUT,
                            resources={"metadata": {"path": str(cwd)}})
    client.execute(cleanup_kc=True)
    return nb


def clean(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """``nb`` without the metadata that differs from run to run: each cell's execution
    timestamps and the notebook's widget state."""
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
    return nb


#: the stylesheet every rendering links (the ``lab`` template's own, written once)
STYLESHEET = "notebook.css"
#: the ``lab`` template without the scripts it loads from a CDN, its stylesheet linked
OFFLINE_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block notebook_css -%}<link rel="stylesheet" href="STYLESHEET">{%- endblock notebook_css -%}
""".replace("STYLESHEET", STYLESHEET)
#: the ``lab`` template's stylesheet block alone
STYLESHEET_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block header -%}{{ self.notebook_css() }}{%- endblock header -%}
{%- block body_header -%}{%- endblock body_header -%}
{%- block body_loop -%}{%- endblock body_loop -%}
{%- block body_footer -%}{%- endblock body_footer -%}
{%- block footer -%}{%- endblock footer -%}
"""
#: math in markdown: $$display$$ first, then $inline$ (a dollar escaped by a backslash is not)
DISPLAY_MATH = re.compile(r"\$\$(.+?)\$\$", re.DOTALL)
INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)(.+?)(?<![\\$])\$(?!\$)", re.DOTALL)


def mathml(tex: str, display: bool) -> str:
    """``tex`` as a MathML element (latex2mathml), without the namespace attribute, which
    HTML does not need and which nbconvert's heading anchors would turn into a prefix
    (``ns0:math``) that browsers do not lay out as math."""
    from latex2mathml.converter import convert

    element = convert(tex.strip(), display="block" if display else "inline")
    return element.replace(' xmlns="http://www.w3.org/1998/Math/MathML"', "", 1)


def math_as_mathml(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """A copy of ``nb`` whose math is MathML: in markdown cells, and ``text/latex`` outputs
    without an HTML form given one."""
    nb = copy.deepcopy(nb)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            source = DISPLAY_MATH.sub(lambda m: mathml(m[1], True), cell.source)
            cell.source = INLINE_MATH.sub(lambda m: mathml(m[1], False), source)
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "text/latex" in data and "text/html" not in data:
                tex = data["text/latex"].strip().strip("$")
                data["text/html"] = mathml(tex, True)
    return nb


def _exporter(template: str):
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter  # only `make notebooks` needs nbconvert

    templates = {"offline.html.j2": OFFLINE_TEMPLATE, "stylesheet.html.j2": STYLESHEET_TEMPLATE}
    return HTMLExporter(template_name=HTML_TEMPLATE, extra_loaders=[DictLoader(templates)],
                        template_file=template)


def to_html(nb: nbformat.NotebookNode) -> str:
    """The static HTML rendering of an executed notebook (nbconvert, ``lab`` template), with
    its math as MathML, its stylesheet linked (:func:`stylesheet`) and no external request."""
    body, _ = _exporter("offline.html.j2").from_notebook_node(math_as_mathml(nb))
    return body


def stylesheet() -> str:
    """The ``lab`` template's stylesheet, which every rendering links as ``STYLESHEET``."""
    body, _ = _exporter("stylesheet.html.j2").from_notebook_node(nbformat.v4.new_notebook())
    return "\n".join(re.findall(r"<style[^>]*>(.*?)</style>", body, re.DOTALL))


def run(path: Path, specs: KernelSpecManager) -> tuple[float, int]:
    """Execute the notebook at ``path`` in place and write ``html/<stem>.html``: the seconds
    it took and the size of the HTML in bytes."""
    nb = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    clean(execute(nb, specs, path.parent))
    seconds = time.perf_counter() - start
    nbformat.validate(nb)
    nbformat.write(nb, path)
    HTML_DIR.mkdir(exist_ok=True)
    html = HTML_DIR / f"{path.stem}.html"
    html.write_text(to_html(nb), encoding="utf-8")
    return seconds, html.stat().st_size


def _selected(names: list[str]) -> list[Path]:
    """The notebooks named by stem or file name; every notebook when none is named."""
    if not names:
        return notebooks()
    by_name = {p.stem: p for p in notebooks()} | {p.name: p for p in notebooks()}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise SystemExit(f"notebook={unknown[0]!r} is not in {NOTEBOOK_DIR.name}/: one of "
                         f"{sorted(p.stem for p in notebooks())}")
    return [by_name[n] for n in names]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", help="stems or file names (default: all)")
    paths = _selected(parser.parse_args(argv).notebooks)
    HTML_DIR.mkdir(exist_ok=True)
    (HTML_DIR / STYLESHEET).write_text(stylesheet(), encoding="utf-8")
    with kernel_specs() as specs:
        for path in paths:
            seconds, size = run(path, specs)
            print(f"{path.name}: executed in {seconds:.1f} s; html/{path.stem}.html {size / 1024:.0f} KiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())

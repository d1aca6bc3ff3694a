"""Sphinx configuration: the user guide (Markdown, through MyST) and the API reference
(autodoc + napoleon from the docstrings). Built by ``make docs`` with warnings as errors."""

import sys
from importlib.metadata import version as _version
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "_ext"))  # the extensions of docs/_ext

project = "fedbound"
author = "the fedbound developers"
# the footer's line (alabaster writes "©" and this); an empty one printed a bare "©."
copyright = f"2026, {author} (MIT License)"
release = _version("fedbound")
version = release

extensions = ["sphinx.ext.autodoc", "sphinx.ext.autosummary", "sphinx.ext.napoleon", "myst_parser",
              "mathml_math", "cli_reference"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
templates_path = ["_templates"]
# math as MathML in the page (docs/_ext/mathml_math.py): nothing loaded from a CDN, and a
# formula that holds prose fails the build
html_math_renderer = "mathml"
myst_enable_extensions = ["dollarmath"]
# a $$...$$ display inside a paragraph (in a list item, the derivations' habit) is a display,
# not the end of one inline formula and the start of the next, with the prose between as math
myst_dmath_double_inline = True
myst_heading_anchors = 3
# typographic quotes, but -- stays two hyphens: options such as --max-memory appear in prose
smartquotes_action = "qe"
# the API reference: one page per module (docs/api/*.rst, generated at each build from
# docs/_templates/autosummary/module.rst)
autosummary_generate = True
autodoc_member_order = "bysource"
autodoc_default_options = {"members": True, "undoc-members": False}
autodoc_typehints = "description"
html_theme = "alabaster"
# docs/_static/fedbound.css: a display formula, a code block or a table wider than the text
# column scrolls inside its own box instead of running past the page's right edge
html_static_path = ["_static"]
html_css_files = ["fedbound.css"]
# bounds re-exports bounds.core (bounds.Theorem is bounds.core.Theorem): a name has two targets
suppress_warnings = ["ref.python"]


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _plain_text(app, what, name, obj, options, lines):
    """The docstrings are written to be read as plain text (``help()``, an editor): norms and
    set sizes as ||x|| and |N_i|, aligned lists with hanging indents. Escape the bars so that
    reStructuredText does not read them as substitutions (``literals`` keep theirs), and
    show a paragraph with a hanging indent (not a table, a directive or a literal block) as
    preformatted text, as it is meant to be read."""
    for k, line in enumerate(lines):
        parts = line.split("``")
        lines[k] = "``".join(p if i % 2 else p.replace("|", r"\|") for i, p in enumerate(parts))
    out, block = [], []

    def flush():
        first = block[0] if block else ""
        special = first.lstrip().startswith(("==", "+-", "..", "- ", "* ")) or (
            out and out[-1 - (out[-1] == "")].rstrip().endswith("::"))
        if block and not special and any(_indent(b) > _indent(first) for b in block[1:]):
            out.extend([".. code-block:: text", ""] + ["    " + b for b in block])
        else:
            out.extend(block)
        block.clear()

    for line in lines:
        if line.strip():
            block.append(line)
        else:
            flush()
            out.append(line)
    flush()
    lines[:] = out


def setup(app):
    app.connect("autodoc-process-docstring", _plain_text, priority=400)  # before napoleon

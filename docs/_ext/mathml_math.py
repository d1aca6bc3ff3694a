"""Sphinx math as MathML, written into the page: no script, nothing from a CDN, so every
formula shows offline, as the report's and the notebooks' do (latex2mathml, which fedbound
already depends on). Each formula keeps its LaTeX as an ``application/x-tex`` annotation.

The build fails (a warning, and ``make docs`` turns warnings into errors) where

* latex2mathml cannot read a formula, or
* a formula holds prose: two ordinary words in a row outside ``\\text{...}`` and its kin,
  the sign of a Markdown parser that took the text between two formulas for a formula
  (MyST did, for a ``$$...$$`` display inside a list item, until ``myst_dmath_double_inline``).

Use: ``extensions = [..., "mathml_math"]`` and ``html_math_renderer = "mathml"``.
"""

from __future__ import annotations

import re
from html import escape

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)

#: the root element latex2mathml writes around a formula, with its content
_MATH_ROOT = re.compile(r"^<math[^>]*>(.*)</math>$", re.DOTALL)
#: LaTeX that sets words as text: ``\text{...}`` and its kin, with their argument
_TEXT = re.compile(r"\\(?:text\w*|mathrm|operatorname\*?|mbox|mathtt|textrm)\s*\{[^{}]*\}")
#: a LaTeX command (``\frac``, ``\le``), which is not a word of prose
_COMMAND = re.compile(r"\\[A-Za-z]+")
#: two ordinary words in a row (letters only, three or more each), the mark of prose
_PROSE = re.compile(r"\b([A-Za-z]{3,})[ \t\n,;.:]+([A-Za-z]{3,})\b")


def prose(tex: str) -> str | None:
    """The first two words in a row that ``tex`` sets as math (``"follow and"``), or None
    (words inside ``\\text{...}`` and commands such as ``\\frac`` do not count)."""
    m = _PROSE.search(_COMMAND.sub(" ", _TEXT.sub(" ", tex)))
    return None if m is None else f"{m[1]} {m[2]}"


def mathml(tex: str, display: bool) -> str:
    """``tex`` as a ``<math>`` element (latex2mathml), its LaTeX kept as an annotation.
    Raises ValueError when latex2mathml cannot read it."""
    from latex2mathml.converter import convert

    try:
        converted = convert(tex.strip(), display="block" if display else "inline")
    except Exception as e:  # noqa: BLE001 - latex2mathml raises several kinds
        raise ValueError(f"latex2mathml cannot read it: {type(e).__name__}: {e}") from None
    inner = _MATH_ROOT.match(converted)[1]
    mode = ' display="block"' if display else ""
    return (f'<math{mode}><semantics><mrow>{inner}</mrow>'
            f'<annotation encoding="application/x-tex">{escape(tex.strip())}</annotation>'
            "</semantics></math>")


def _render(self, node, display: bool) -> str:
    tex = node.astext()
    words = prose(tex)
    if words is not None:
        logger.warning(f"prose typeset as math ({words!r}): {tex[:120]!r}", location=node)
    try:
        return mathml(tex, display)
    except ValueError as e:
        logger.warning(f"{e}: {tex[:120]!r}", location=node)
        return f"<code>{escape(tex)}</code>"


def visit_math(self, node) -> None:
    self.body.append(self.starttag(node, "span", "", CLASS="math"))
    self.body.append(_render(self, node, display=False) + "</span>")
    raise nodes.SkipNode


def visit_displaymath(self, node) -> None:
    self.body.append(self.starttag(node, "div", CLASS="math"))
    self.body.append(_render(self, node, display=True) + "</div>\n")
    raise nodes.SkipNode


def setup(app):
    app.add_html_math_renderer("mathml", (visit_math, None), (visit_displaymath, None))
    return {"parallel_read_safe": True, "parallel_write_safe": True}

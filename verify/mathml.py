"""Math as text for the HTML report: MathML (presentation markup, which current browsers
lay out natively, offline, without JavaScript) with its LaTeX source beside it.

* :func:`of_expr`: a sympy expression, through sympy's presentation printer;
* :func:`of_latex`: the LaTeX a theorem writes for its left-hand side (``Theorem.lhs``:
  a string, not a sympy expression), through latex2mathml; LaTeX it cannot read is shown
  as its source in an ``<mtext>``, never dropped;
* :func:`prose_parts`: prose with inline math in ``$...$`` (as an erratum writes its
  printed and corrected formulas) cut into its text and its LaTeX, and :func:`inline`, the
  MathML of such a span.

No sympy import outside these functions' module; no torch, no matplotlib.
"""

from __future__ import annotations

import re
from functools import cache
from html import escape

import sympy as sp
from latex2mathml.converter import convert
from sympy.printing.mathml import mathml
from sympy.printing.pretty.pretty_symbology import greek_unicode

# ---------------------------------------------------------------------- sympy


#: a Greek letter's name -> its Unicode letter (sympy's own table, used by its printers)
_GREEK = greek_unicode
#: LaTeX accents in symbol names (``\\hat{K}_{max}``) as Unicode combining marks
_NAME_ACCENTS = {"hat": "\u0302", "tilde": "\u0303", "bar": "\u0304"}


def _plain_name(name: str) -> str:
    """A symbol name written in LaTeX (``\\hat{K}_{max}``) as sympy's printer reads names
    (``K\u0302_max``): accents as combining marks, Greek letters as Unicode, braces gone."""
    name = re.sub(r"\\(hat|tilde|bar)\{(\w+)\}", lambda m: m[2] + _NAME_ACCENTS[m[1]], name)
    name = re.sub(r"\\([A-Za-z]+)", lambda m: _GREEK.get(m[1], m[1]), name)
    return name.replace("{", "").replace("}", "")


def of_expr(expr: sp.Basic) -> str:
    """The presentation MathML of ``expr`` (without the ``<math>`` element); symbols whose
    names hold LaTeX are shown by :func:`_plain_name`."""
    latex_named = {s: sp.Symbol(_plain_name(s.name), **s.assumptions0)
                   for s in expr.free_symbols if isinstance(s, sp.Symbol) and "\\" in s.name}
    return mathml(expr.xreplace(latex_named) if latex_named else expr, printer="presentation")


def block(content: str) -> str:
    """``content`` (MathML elements) as a displayed formula."""
    return f'<math display="block">{content}</math>'


# ---------------------------------------------------------------------- LaTeX

#: the root element latex2mathml writes around a formula
_MATH_ROOT = re.compile(r"^<math[^>]*>(.*)</math>$", re.DOTALL)
#: the presentation-MathML elements a formula may hold (latex2mathml copies the text of
#: ``\text{...}`` unescaped, so markup in a plugin's LaTeX would otherwise pass through)
_MATHML_ELEMENTS = frozenset(
    "math mrow mi mn mo mtext ms mspace msub msup msubsup mfrac msqrt mroot munder mover "
    "munderover mstyle mpadded mphantom menclose mtable mtr mtd mfenced merror".split())


def _only_mathml(markup: str) -> bool:
    """Whether ``markup`` is well-formed XML made of MathML elements only."""
    from xml.etree import ElementTree

    try:
        root = ElementTree.fromstring(markup)
    except ElementTree.ParseError:
        return False
    return all(e.tag.rsplit("}", 1)[-1] in _MATHML_ELEMENTS for e in root.iter())


def of_latex(tex: str) -> str:
    """``tex`` as MathML elements (without the ``<math>`` element), through latex2mathml;
    LaTeX it cannot read, or that would bring markup other than MathML, as its source in an
    ``<mtext>``, never dropped."""
    try:
        math = convert(tex)
    except Exception:  # noqa: BLE001 - anything latex2mathml rejects is shown as its source
        math = ""
    if not _only_mathml(math):
        return f"<mtext>{escape(tex)}</mtext>"
    return _MATH_ROOT.match(math)[1]


#: inline math in prose: ``$...$`` (a dollar escaped by a backslash is not one)
INLINE_MATH = re.compile(r"(?<!\\)\$(.+?)(?<!\\)\$", re.DOTALL)


def prose_parts(text: str) -> list[tuple[bool, str]]:
    """``text`` as its pieces in order, each ``(is_math, piece)``: the LaTeX of every
    ``$...$`` span (without the dollars) and the prose between them (empty pieces left out)."""
    pieces = INLINE_MATH.split(text)
    return [(i % 2 == 1, p) for i, p in enumerate(pieces) if p]


@cache
def inline(tex: str) -> str:
    """``tex`` as an inline ``<math>`` element (:func:`of_latex`); cached: an erratum shared
    by several results and variants is converted once per report."""
    return f"<math>{of_latex(tex)}</math>"

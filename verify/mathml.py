"""Math as text for the HTML report: MathML (presentation markup, which current browsers
lay out natively, offline, without JavaScript) with its LaTeX source beside it.

* :func:`of_expr`: a sympy expression, through sympy's presentation printer;
* :func:`of_latex`: the LaTeX a theorem writes for its left-hand side (``Theorem.lhs``:
  a string, not a sympy expression), through latex2mathml; LaTeX it cannot read is shown
  as its source in an ``<mtext>``, never dropped;
* :func:`parse_text`: an erratum's printed or corrected text as a sympy expression where
  it is one (``"zeta/(1-zeta^2) + 2/(1-zeta)"``), else None (prose stays prose).

No sympy import outside these functions' module; no torch, no matplotlib.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Mapping
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


#: operators that make a string math rather than prose
_OPERATOR = re.compile(r"[-+*/^=<>]")
#: where a formula's prose tail starts: "; ..." or " (larger by ...)" (a parenthesis that
#: opens with a word and a space)
_PROSE_TAIL = re.compile(r";\s*|\s+\((?=[A-Za-z]{2,}\s+[A-Za-z])")
_RELATION = re.compile(r"<=|>=|<|>|(?<![<>=!])=(?!=)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")
#: the functions an erratum's formula may call; every other name is a symbol
_FUNCTIONS = {"sqrt": sp.sqrt, "max": sp.Max, "Max": sp.Max, "min": sp.Min, "Min": sp.Min,
              "ceil": sp.ceiling, "log": sp.log, "exp": sp.exp}
#: what sympy's parser needs to build an unevaluated expression, and nothing else
_PARSER_GLOBALS = {c.__name__: c for c in (sp.Symbol, sp.Integer, sp.Float, sp.Rational,
                                           sp.Add, sp.Mul, sp.Pow, sp.Le, sp.Lt, sp.Ge, sp.Gt)}


def split_prose(text: str) -> tuple[str, str]:
    """``text`` as (formula, prose tail): ``"a + b (larger by c)"`` -> ``("a + b",
    "(larger by c)")`` (a parenthesis that opens with two words is prose); the tail is ""
    when there is none."""
    m = _PROSE_TAIL.search(text)
    if m is None:
        return text.strip(), ""
    return text[:m.start()].strip(), text[m.start():].lstrip("; ").strip()


def _implicit_products(text: str) -> str:
    """``3 tau^2 L^2`` -> ``3*tau^2*L^2``, ``2M`` -> ``2*M``: products written by juxtaposition,
    as the errata print them (a name directly before ``(`` stays a call)."""
    text = re.sub(r"(?<=[\w)])\s+(?=[\w(])", "*", text.strip()).replace(")(", ")*(")
    return re.sub(r"(?<![A-Za-z_\d])(\d+)(?=[A-Za-z(])", r"\1*", text)


def _is_word(name: str, symbols: Mapping[str, sp.Symbol]) -> bool:
    """A name that reads as an English word rather than a symbol: three or more letters
    before any subscript, and neither a symbol of the theorem, a Greek letter nor a
    function."""
    base = name.split("_", 1)[0]
    return len(base) >= 3 and name not in symbols and base not in _GREEK and name not in _FUNCTIONS


def parse_text(text: str, symbols: Mapping[str, sp.Symbol]) -> sp.Expr | None:
    """``text`` as a sympy expression (``^`` is a power, juxtaposition a product; every
    name is a plain symbol, the theorem's own ``symbols`` where it has them, so ``beta`` is
    never sympy's beta function), or None when it does not parse or reads as prose (no
    operator, or a word that is no symbol)."""
    from sympy.parsing.sympy_parser import convert_xor, parse_expr, standard_transformations

    names = _NAME.findall(text)
    if (not _OPERATOR.search(text) or any(_is_word(n, symbols) for n in names)
            or len(_RELATION.findall(text)) > 1):  # a chain a <= b <= c: Python drops a part
        return None
    local = {n: _FUNCTIONS.get(n) or symbols.get(n, sp.Symbol(n)) for n in names}
    sides = re.split(r"(?<![<>=!])=(?!=)", text)  # a lone "=" is an equation
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parsed = [parse_expr(_implicit_products(side), local_dict=local,
                                 global_dict=_PARSER_GLOBALS,
                                 transformations=(*standard_transformations, convert_xor))
                      for side in sides]
    except Exception:  # noqa: BLE001 - anything that does not parse is shown as text
        return None
    if len(parsed) == 2:
        parsed = [sp.Eq(*parsed, evaluate=False)]
    ok = len(parsed) == 1 and isinstance(parsed[0], (sp.Expr, sp.Rel))
    return parsed[0] if ok else None


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

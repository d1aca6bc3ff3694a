"""Math as text for the HTML report: MathML (presentation markup, which current browsers
lay out natively, offline, without JavaScript) with its LaTeX source beside it.

* :func:`of_expr`: a sympy expression, through sympy's presentation printer;
* :func:`of_latex`: the LaTeX a theorem writes for its left-hand side (``Theorem.lhs``:
  a string, not a sympy expression), through a small translator of the subset of LaTeX
  the theorem modules use (fractions, sums, sub- and superscripts, norms, Greek letters,
  accents, blackboard and calligraphic letters); anything else is shown as its LaTeX
  source in an ``<mtext>``, never dropped;
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
from sympy.printing.mathml import mathml

# ---------------------------------------------------------------------- sympy


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


# ---------------------------------------------------------------------- LaTeX subset

_GREEK = {name: chr(code) for name, code in (
    ("alpha", 0x3B1), ("beta", 0x3B2), ("gamma", 0x3B3), ("delta", 0x3B4), ("epsilon", 0x3F5),
    ("varepsilon", 0x3B5), ("zeta", 0x3B6), ("eta", 0x3B7), ("theta", 0x3B8), ("iota", 0x3B9),
    ("kappa", 0x3BA), ("lambda", 0x3BB), ("mu", 0x3BC), ("nu", 0x3BD), ("xi", 0x3BE),
    ("pi", 0x3C0), ("rho", 0x3C1), ("sigma", 0x3C3), ("tau", 0x3C4), ("phi", 0x3D5),
    ("varphi", 0x3C6), ("chi", 0x3C7), ("psi", 0x3C8), ("omega", 0x3C9), ("Gamma", 0x393),
    ("Delta", 0x394), ("Theta", 0x398), ("Lambda", 0x39B), ("Xi", 0x39E), ("Pi", 0x3A0),
    ("Sigma", 0x3A3), ("Phi", 0x3A6), ("Psi", 0x3A8), ("Omega", 0x3A9))}
_OPERATORS = {"nabla": "\u2207", "|": "\u2016", "to": "\u2192", "infty": "\u221e",
              "le": "\u2264", "leq": "\u2264", "ge": "\u2265", "geq": "\u2265", "cdot": "\u22c5",
              "times": "\u00d7", "partial": "\u2202", "sum": "\u2211", "prod": "\u220f",
              "ldots": "\u2026", "dots": "\u2026", "in": "\u2208", "quad": "\u2003",
              ",": "\u2009", "limsup": "lim sup", "liminf": "lim inf", "lim": "lim",
              "max": "max", "min": "min", "log": "log", "exp": "exp"}
#: operators whose sub- and superscripts go below and above
_LIMITS = {"sum", "prod", "limsup", "liminf", "lim", "max", "min"}
_ACCENTS = {"hat": "^", "tilde": "~", "bar": "\u00af"}
_SIZES = {"big", "Big", "bigg", "Bigg", "left", "right", "displaystyle"}
#: mathematical alphanumeric letters (Unicode): the start of each capital alphabet and the
#: letters that live in the Letterlike Symbols block instead
_ALPHABETS = {"mathbb": (0x1D538, {"C": 0x2102, "H": 0x210D, "N": 0x2115, "P": 0x2119,
                                    "Q": 0x211A, "R": 0x211D, "Z": 0x2124}),
              "mathcal": (0x1D49C, {"B": 0x212C, "E": 0x2130, "F": 0x2131, "H": 0x210B,
                                     "I": 0x2110, "L": 0x2112, "M": 0x2133, "R": 0x211B})}
_TOKEN = re.compile(r"\\[A-Za-z]+|\\.|\d+(?:\.\d+)?|\s+|.")


class _Unsupported(ValueError):
    """LaTeX outside the subset :func:`of_latex` translates."""


def _letter(style: str, ch: str) -> str:
    start, special = _ALPHABETS[style]
    if ch in special:
        return chr(special[ch])
    if "A" <= ch <= "Z":
        return chr(start + ord(ch) - ord("A"))
    raise _Unsupported(f"\\{style}{{{ch}}}")


class _Parser:
    def __init__(self, tex: str):
        self.tokens = [t for t in _TOKEN.findall(tex) if not t.isspace()]
        self.i = 0

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self) -> str:
        tok = self.peek()
        if tok is None:
            raise _Unsupported("unexpected end")
        self.i += 1
        return tok

    def group(self) -> str:
        """One argument: a braced group or a single token, as one MathML element."""
        if self.peek() == "{":
            self.take()
            items = self.sequence(until="}")
            self.take()
            return f"<mrow>{''.join(items)}</mrow>"
        return self.atom()

    def raw_group(self) -> str:
        """The text of a braced argument (``\\mathbb{E}``, ``\\text{...}``)."""
        if self.take() != "{":
            raise _Unsupported("expected {")
        out = []
        while self.peek() != "}":
            out.append(self.take())
        self.take()
        return "".join(out)

    def sequence(self, until: str | None = None) -> list[str]:
        items: list[str] = []
        while self.peek() is not None and self.peek() != until:
            items.append(self.scripts(self.atom()))
        return items

    def scripts(self, base: str) -> str:
        sub = sup = None
        while self.peek() in ("_", "^"):
            if self.take() == "_":
                sub = self.group()
            else:
                sup = self.group()
        if sub is None and sup is None:
            return base
        under = base.startswith('<mo movablelimits="false"')
        if sub is not None and sup is not None:
            tag = "munderover" if under else "msubsup"
            return f"<{tag}>{base}{sub}{sup}</{tag}>"
        tag = ("munder" if under else "msub") if sup is None else ("mover" if under else "msup")
        return f"<{tag}>{base}{sub if sup is None else sup}</{tag}>"

    def atom(self) -> str:
        tok = self.take()
        if tok.startswith("\\") and len(tok) > 1:
            return self.command(tok[1:])
        if tok == "{":
            items = self.sequence(until="}")
            self.take()
            return f"<mrow>{''.join(items)}</mrow>"
        if tok.isdigit() or tok.replace(".", "", 1).isdigit():
            return f"<mn>{tok}</mn>"
        if tok.isalpha():
            return f"<mi>{escape(tok)}</mi>"
        if tok in "}_^":
            raise _Unsupported(tok)
        return f"<mo>{escape(tok)}</mo>"

    def command(self, name: str) -> str:
        if name in _GREEK:
            return f"<mi>{_GREEK[name]}</mi>"
        if name in _LIMITS:
            large = ' largeop="true"' if name in ("sum", "prod") else ""
            return f'<mo movablelimits="false"{large}>{_OPERATORS[name]}</mo>'
        if name in _OPERATORS:
            return f"<mo>{_OPERATORS[name]}</mo>"
        if name == "frac":
            return f"<mfrac>{self.group()}{self.group()}</mfrac>"
        if name in _ACCENTS:
            return f'<mover accent="true">{self.group()}<mo>{_ACCENTS[name]}</mo></mover>'
        if name in _ALPHABETS:
            return f"<mi>{''.join(_letter(name, c) for c in self.raw_group())}</mi>"
        if name in ("text", "mathrm", "operatorname"):
            return f"<mtext>{escape(self.raw_group())}</mtext>"
        if name in _SIZES:  # the delimiter that follows is an operator of its own
            return ""
        raise _Unsupported(f"\\{name}")


def of_latex(tex: str) -> str:
    """``tex`` (the subset of the module docstring) as MathML elements; LaTeX outside the
    subset as its source in an ``<mtext>``."""
    parser = _Parser(tex)
    try:
        items = parser.sequence()
    except _Unsupported:
        return f"<mtext>{escape(tex)}</mtext>"
    return f"<mrow>{''.join(items)}</mrow>"

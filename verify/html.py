"""The HTML of fedbound's reports: the Jinja2 environment of ``verify/templates/``
(autoescaping on), and the filters that turn prose into safe HTML with its math as MathML
(:func:`prose`), link a citation to the bibliography (:func:`cite`) and mark the ASCII
symbols of a text as math (:func:`term_prose`). The check report (``verify.report``) and the
reproduction report (``verify.claims_report``) both render through it."""

from __future__ import annotations

import re
from functools import cache

from markupsafe import Markup, escape

from . import mathml

#: a derivation of the package named in prose ("bounds/derivations/tdcd_refined.md")
_DERIVATION = re.compile(r"\bbounds/derivations/(\w+)\.md\b")


def prose(text: str, root: str | None = None) -> Markup:
    """Text with its ``$...$`` spans as inline MathML (:func:`verify.mathml.inline`) and
    ``double backtick`` markup shown as code (the text escaped first). With ``root`` (the
    report's root relative to the page), a derivation the text names links to its page in
    the report (:func:`derivations`)."""
    out = "".join(
        mathml.inline(piece) if is_math
        else re.sub(r"``(.+?)``", r"<code>\1</code>", str(escape(piece)))
        for is_math, piece in mathml.prose_parts(text))
    if root is not None:
        out = _DERIVATION.sub(lambda m: f'<a href="{root}derivations/{m[1]}.html">{m[0]}</a>', out)
    return Markup(out)


def breakable(text: str) -> Markup:
    """A name (a result's key, a witness file) escaped, with a line-break opportunity after
    each dot, underscore and slash: a narrow column or sidebar wraps it there instead of
    cutting it or scrolling (``mllsgd.theorem1_<wbr>limit``)."""
    return Markup(re.sub(r"([._/])", r"\1<wbr>", str(escape(text))))


def derivations() -> dict[str, str]:
    """The derivations that ship in the package (``fedbound.bounds.derivations``): their
    Markdown by name (``"tdcd_refined"``)."""
    from importlib.resources import files

    folder = files("fedbound.bounds") / "derivations"
    return {p.name.removesuffix(".md"): p.read_text(encoding="utf-8")
            for p in folder.iterdir() if p.name.endswith(".md")}


def cite(text: str, root: str = "") -> Markup:
    """A citation (escaped) whose paper's short cite links to the bibliography page."""
    from fedbound.bounds.references import PAPERS

    out = str(prose(text, root))
    for p in PAPERS.values():
        short = str(escape(p.short))
        out = out.replace(short, f'<a href="{root}references.html#{p.key}">{short}</a>', 1)
    return Markup(out)


@cache
def environment():
    """The Jinja2 environment of the report templates (autoescaping on)."""
    from jinja2 import Environment, PackageLoader, StrictUndefined, pass_context

    env = Environment(loader=PackageLoader(__package__, "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    # prose links the derivations it names, relative to the page's root where it has one
    env.filters.update(prose=pass_context(lambda context, text: prose(text, context.get("root"))),
                       cite=cite, breakable=breakable)
    return env


def render(template: str, **context) -> str:
    return environment().get_template(template).render(legend=STATUS_LEGEND, **context)


#: what each status of a result (``bounds.registry.STATUSES``) means: the legend of the
#: report's pages, where each status has its colour and its label (``report.css``)
STATUS_LEGEND = {
    "holds": "no scenario known to fedbound violates it",
    "holds-with-erratum": "holds once the errata listed on its page are applied",
    "refuted": "a stored witness violates the statement, explicit constants and all",
    "rate-refuted": "even its published O(.) rate fails along a sweep in its regime",
    "unverified": "as printed: not claimed to hold, checked as a reading of the paper",
}


#: a symbol in a term's name ("sigma_G floor", "noise: eta L Q", "kappa^2"): a Greek letter's
#: name or a capital letter, with a subscript and a power, written in ASCII as the
#: parameters are
_GREEK_NAMES = "|".join(sorted((g for g in mathml._GREEK if g.isalpha()), key=len, reverse=True))
_TERM_SYMBOL = rf"(?:(?:{_GREEK_NAMES})|[A-Z])(?:_[A-Za-z0-9]+)?(?:\^[0-9]+)?"
#: a run of such symbols, alone between spaces or punctuation ("eta L Q")
_TERM_MATH = re.compile(rf"(?<![\w$\\^-])({_TERM_SYMBOL}(?: {_TERM_SYMBOL})*)(?![\w$^-])")


def _symbol_latex(symbol: str) -> str:
    """One ASCII symbol of a term's name as LaTeX: ``sigma_G^2`` -> ``\\sigma_{G}^{2}``."""
    name, _, power = symbol.partition("^")
    base, _, sub = name.partition("_")
    tex = f"\\{base}" if base in mathml._GREEK else base
    return tex + (f"_{{{sub}}}" if sub else "") + (f"^{{{power}}}" if power else "")


def term_prose(name: str) -> str:
    """A term's name (a key of ``Theorem.terms``, ASCII as the parameters are) as prose with
    its symbols in ``$...$`` (:func:`prose` renders them as MathML) and " x " as a times
    sign: "noise: staleness x L" -> "noise: staleness × $L$"."""
    name = re.sub(r"(?<=\w) x (?=\w)", " \u00d7 ", name)
    return _TERM_MATH.sub(lambda m: "$" + " ".join(map(_symbol_latex, m[1].split())) + "$", name)

"""The results of the four papers, registered without building them.

Each row names the module of :mod:`bounds` and the function that builds the result
(``function(variant) -> Theorem``), its title, variants, default variant and the status of
each variant; the module (and sympy) is imported on the first :func:`bounds.get` of the
result. ``tests/test_catalog.py`` builds every row and checks it against this table.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from .registry import register

HOLDS, ERRATUM, REFUTED, RATE_REFUTED, UNVERIFIED = (
    "holds", "holds-with-erratum", "refuted", "rate-refuted", "unverified")

#: (key, title, {variant: status} in the order of the variants, default variant) per result
RESULTS: tuple[tuple[str, str, dict[str, str], str], ...] = (
    ("mllsgd.theorem1", "MLL-SGD convergence bound (13)",
     {"printed": UNVERIFIED, "proof": ERRATUM, "tight": ERRATUM}, "proof"),
    ("mllsgd.theorem1_limit", "MLL-SGD error floor (14)",
     {"printed": UNVERIFIED, "proof": ERRATUM, "tight": ERRATUM}, "proof"),
    ("mllsgd.corollary1", "MLL-SGD rate at eta = 1/(L sqrt K)",
     {"proof": ERRATUM, "tight": ERRATUM}, "proof"),
    ("hfl.lemma1", "HFL model deviation (18)", {"printed": HOLDS, "proof": HOLDS}, "proof"),
    ("hfl.theorem1", "HFL per-group bound (19)", {"proof": ERRATUM}, "proof"),
    ("hfl.theorem2", "HFL global bound (20)",
     {"printed": ERRATUM, "arxiv": ERRATUM, "proof": ERRATUM, "tight": ERRATUM, "refined": HOLDS,
      "iid": HOLDS},
     "proof"),
    ("hfl.corollary1", "HFL rate, Corollary 1",
     {"printed": ERRATUM, "proof": ERRATUM, "refined": HOLDS, "iid": HOLDS}, "proof"),
    ("tdcd.theorem1", "TDCD convergence bound (15)",
     {"printed": UNVERIFIED, "proof": ERRATUM, "tight": ERRATUM, "refined": HOLDS}, "proof"),
    ("tdcd.lemma2", "TDCD drift of local gradients (30)", {"proof": ERRATUM, "tight": ERRATUM},
     "proof"),
    ("tdcd.remark5", "TDCD rate at eta = c/(Q sqrt R)", {"proof": ERRATUM}, "proof"),
    ("afl.theorem1", "AFL lower bound Omega(sigma_G^2)", {"proof": HOLDS}, "proof"),
    ("afl.theorem2", "AFA-CD, general arrivals", {"printed": UNVERIFIED, "proof": ERRATUM},
     "proof"),
    ("afl.theorem3", "AFA-CD, uniform arrivals", {"printed": REFUTED, "proof": REFUTED}, "proof"),
    ("afl.theorem4", "AFA-CS, bounded staleness", {"printed": REFUTED, "proof": REFUTED}, "proof"),
    ("afl.corollary1", "AFA-CD rate, general arrivals",
     {"printed": UNVERIFIED, "proof": ERRATUM}, "proof"),
    ("afl.corollary2", "AFA-CD rate, uniform arrivals",
     {"printed": RATE_REFUTED, "proof": RATE_REFUTED}, "proof"),
    ("afl.corollary3", "AFA-CS rate", {"printed": RATE_REFUTED, "proof": RATE_REFUTED}, "proof"),
)


def builder(key: str) -> Callable:
    """The function that builds ``key`` (``bounds.mllsgd.theorem1`` for "mllsgd.theorem1"),
    importing its module on the first call."""
    module, function = key.split(".")

    def build(variant: str):
        return getattr(importlib.import_module(f"fedbound.bounds.{module}"), function)(variant)

    build.__qualname__ = build.__name__ = function
    return build


def register_all() -> None:
    """Register every result of :data:`RESULTS` (called once, by ``import bounds``)."""
    for key, title, statuses, default in RESULTS:
        register(key, title, builder(key), tuple(statuses), default, statuses)

"""The bibliography of fedbound: the four papers whose results ``bounds`` encodes.

Every citation in the package names one of these papers by its short cite and a place any
reader of the published paper can find (theorem, lemma, equation, section, appendix):

>>> from fedbound.bounds.references import cite
>>> cite("hfl", "Theorem 2, eq. (20)")
'Ali & Arafa 2025, Theorem 2, eq. (20)'
>>> cite("mllsgd", "proof of Theorem 1, (180)")
'Castiglia et al. 2021, proof of Theorem 1, (180)'

The keys are the prefixes of the registered results (``mllsgd.theorem1`` cites ``mllsgd``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    """One published paper: ``authors`` in the paper's order, ``venue`` where it appeared,
    ``arxiv`` / ``doi`` when known (None otherwise), ``note`` on versions."""

    key: str
    authors: tuple[str, ...]
    title: str
    venue: str
    year: int
    arxiv: str | None = None
    doi: str | None = None
    note: str = ""

    @property
    def short(self) -> str:
        """The short cite: "Ali & Arafa 2025" (two authors), "Castiglia et al. 2021" (more)."""
        surnames = [a.split()[-1] for a in self.authors]
        who = " & ".join(surnames) if len(surnames) <= 2 else f"{surnames[0]} et al."
        return f"{who} {self.year}"

    def entry(self) -> str:
        """The full reference: authors, title, venue, year, then arXiv id or DOI if known."""
        ids = "".join(f", {label} {value}" for label, value in
                      (("arXiv", self.arxiv), ("doi", self.doi)) if value)
        return f"{', '.join(self.authors)}. {self.title}. {self.venue}, {self.year}{ids}."


PAPERS: dict[str, Paper] = {p.key: p for p in (
    Paper("mllsgd", ("Timothy Castiglia", "Anirban Das", "Stacy Patterson"),
          "Multi-Level Local SGD: Distributed SGD for Heterogeneous Hierarchical Networks",
          "International Conference on Learning Representations (ICLR)", 2021,
          arxiv="2007.13819",
          note="The arXiv version is titled 'Multi-Level Local SGD for Heterogeneous "
               "Hierarchical Networks'."),
    Paper("hfl", ("Abdulmoneam Ali", "Ahmed Arafa"),
          "Delay Sensitive Hierarchical Federated Learning With Stochastic Local Updates",
          "IEEE Transactions on Cognitive Communications and Networking", 2025,
          arxiv="2302.04851", doi="10.1109/TCCN.2025.3527699",
          note="Equation numbers are the journal version's; the arXiv version has the same "
               "numbering in the main text. Presented in part at the Asilomar Conference on "
               "Signals, Systems, and Computers, 2022."),
    Paper("tdcd", ("Anirban Das", "Timothy Castiglia", "Shiqiang Wang", "Stacy Patterson"),
          "Cross-Silo Federated Learning for Multi-Tier Networks with Vertical and Horizontal "
          "Data Partitioning", "ACM Transactions on Intelligent Systems and Technology (TIST)",
          2022, arxiv="2108.08930"),
    Paper("afl", ("Haibo Yang", "Xin Zhang", "Prashant Khanduri", "Jia Liu"),
          "Anarchic Federated Learning", "International Conference on Machine Learning (ICML)",
          2022, arxiv="2108.09875"),
)}


def paper(key: str) -> Paper:
    """The paper of a short key (``"hfl"``) or of a result key (``"hfl.theorem2"``)."""
    short = key.split(".", 1)[0]
    if short not in PAPERS:
        raise ValueError(f"key={key!r} names no paper of the bibliography: the paper part must "
                         f"be one of {sorted(PAPERS)}")
    return PAPERS[short]


def cite(key: str, where: str = "") -> str:
    """The short citation of a place in a paper: ``cite("hfl", "eq. (20)")`` gives
    "Ali & Arafa 2025, eq. (20)"; without ``where``, the short cite alone."""
    short = paper(key).short
    return f"{short}, {where}" if where else short


"""The bibliography (bounds.references): short cites, entries, bad keys."""

import re
from fnmatch import fnmatch
from pathlib import Path

import pytest

from fedbound import bounds
from fedbound.bounds.references import PAPERS, cite, paper


@pytest.mark.parametrize("key, short", [
    ("mllsgd", "Castiglia et al. 2021"), ("hfl", "Ali & Arafa 2025"),
    ("tdcd", "Das et al. 2022"), ("afl", "Yang et al. 2022"),
])
def test_short_cites(key, short):
    assert PAPERS[key].short == short
    assert cite(key) == short


def test_cite_a_place():
    assert cite("hfl", "Theorem 2, eq. (20)") == "Ali & Arafa 2025, Theorem 2, eq. (20)"
    assert cite("mllsgd.theorem1", "proof of Theorem 1, (180)") == (
        "Castiglia et al. 2021, proof of Theorem 1, (180)")


def test_keys_are_the_result_prefixes():
    assert set(PAPERS) <= {key.split(".")[0] for key in bounds.keys()}
    for key in bounds.keys():
        if key.split(".")[0] in PAPERS:
            assert paper(key) is PAPERS[key.split(".")[0]]


def test_entries_are_complete_and_frozen():
    for key, p in PAPERS.items():
        assert p.key == key and p.authors and p.title and p.venue and 2000 < p.year < 2100
        entry = p.entry()
        assert entry.startswith(p.authors[0]) and p.title in entry and str(p.year) in entry
        # every paper has a preprint a reader can open: arXiv's new-style identifier
        assert re.fullmatch(r"\d{4}\.\d{4,5}", p.arxiv) and f"arXiv {p.arxiv}" in entry
    assert "doi 10.1109/TCCN.2025.3527699" in PAPERS["hfl"].entry()
    with pytest.raises(AttributeError):
        PAPERS["hfl"].year = 2024


def test_exported_from_bounds():
    assert bounds.cite is cite and bounds.PAPERS is PAPERS


@pytest.mark.parametrize("key", ["nope", "", "HFL.theorem2"])
def test_unknown_key_names_the_key_and_the_rule(key):
    with pytest.raises(ValueError, match=rf"key={key!r}.*one of \['afl', 'hfl', 'mllsgd', 'tdcd'\]"):
        cite(key, "eq. (1)")


_PACKAGE_FILE = re.compile(r"\b(bounds|sim|verify)/([\w/.-]+\.(?:md|json|html|txt|css))\b")
ROOT = Path(__file__).resolve().parents[1]


def _files_named_in_the_package() -> set[tuple[str, str]]:
    """(package, file inside it) for every package file the package's sources name."""
    return {m.groups() for pkg in ("bounds", "sim", "verify")
            for src in (ROOT / pkg).rglob("*.py")
            for m in _PACKAGE_FILE.finditer(src.read_text())}


def _package_of(folder: Path) -> str:
    """The import name of a folder of the source tree (``verify/papers`` is
    ``fedbound.verify.papers``)."""
    return ".".join(["fedbound", *folder.relative_to(ROOT).parts])


def test_every_file_the_package_names_is_package_data():
    """fedbound's derivations (derived by fedbound, not published), the shipped tightness
    table: a file that the package cites must exist and be package data (pyproject.toml), so
    that an installed fedbound carries it; .ci/wheel.sh checks the built wheel the same way."""
    tomllib = pytest.importorskip("tomllib")
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    named = _files_named_in_the_package()
    assert ("bounds", "derivations/hfl_refined.md") in named
    assert ("bounds", "derivations/hfl_iid.md") in named
    assert ("bounds", "derivations/tdcd_refined.md") in named
    for pkg, rel in named:
        path = ROOT / pkg / rel
        assert path.is_file(), f"{pkg}/{rel} is named but missing"
        owner = _package_of(path.parent)
        assert any(fnmatch(path.name, g) for g in data["package-data"].get(owner, [])), (
            f"{pkg}/{rel} is not package data of {owner} in pyproject.toml")


def test_every_package_of_the_source_tree_is_in_the_wheel():
    """pyproject.toml lists the packages explicitly, each folder of data too (a folder left
    out of the list is missing from the wheel, as verify.reproduce once was, which only the
    wheel job saw): every folder of bounds/, sim/ and verify/ that holds a file, by its
    import name under fedbound."""
    import tomllib

    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"fedbound"} | {_package_of(f.parent) for top in ("bounds", "sim", "verify")
                            for f in (ROOT / top).rglob("*")
                            if f.is_file() and "__pycache__" not in f.parts}
    assert found == listed

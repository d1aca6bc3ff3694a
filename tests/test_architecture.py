"""The import structure the design fixes (``docs/architecture.md``): no import circle
anywhere, lazy imports included; the generic engine of ``verify`` imports no paper and names
none; a paper imports only ``fedbound.verify.api`` of ``verify``; the engine is at most
``MAX_FLOORS`` floors deep; and no core module (``bounds``, ``sim``, ``verify`` but a paper's
plugin and the papers' own modules of ``bounds`` and ``sim``) names a paper's theorem key, so
that nothing in the core lists the papers' results.

The graph is read from the source files (every ``import`` statement, module-level, inside a
function or under ``TYPE_CHECKING``), each module named as the installed package names it:
``bounds/core.py`` is ``fedbound.bounds.core``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: the folders of the package, by import name
FOLDERS = {"fedbound": ROOT / "fedbound", "fedbound.bounds": ROOT / "bounds",
           "fedbound.sim": ROOT / "sim", "fedbound.verify": ROOT / "verify"}
PAPERS = "fedbound.verify.papers"
API = "fedbound.verify.api"
MAX_FLOORS = 8
#: a paper's name: its key prefix (mllsgd.theorem1) or its module
PAPER_NAME = re.compile(r"\b(mllsgd|hfl|tdcd|afl)\b")


def modules() -> dict[str, Path]:
    out = {}
    for package, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join([package, *parts])] = path
    return out


MODULES = modules()


def _resolve(module: str, node: ast.ImportFrom) -> list[str]:
    base = module.split(".")
    if MODULES[module].name != "__init__.py":
        base = base[:-1]
    if node.level:
        base = base[:len(base) - (node.level - 1)]
        stem = ".".join(base + ([node.module] if node.module else []))
    else:
        stem = node.module or ""
    return [f"{stem}.{a.name}" if f"{stem}.{a.name}" in MODULES else stem for a in node.names]


def imports(module: str) -> set[str]:
    """The modules of fedbound that ``module`` imports (the closest enclosing module of each
    name it imports)."""
    found = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            targets = _resolve(module, node)
        else:
            continue
        for t in targets:
            while t and t not in MODULES:
                t = t.rpartition(".")[0]
            if t and t != module:
                found.add(t)
    return found


GRAPH = {m: imports(m) for m in MODULES}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def is_paper(module: str) -> bool:
    return module == PAPERS or module.startswith(PAPERS + ".")


ENGINE = sorted(m for m in MODULES if m.startswith("fedbound.verify") and not is_paper(m))


def test_the_graph_sees_the_known_imports():
    assert "fedbound.bounds.registry" in GRAPH["fedbound.bounds.core"]  # relative import
    assert API in GRAPH[f"{PAPERS}.hfl"]  # absolute import from the package
    assert circles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [["a", "b"]]


def test_no_import_circle_anywhere():
    assert circles(GRAPH) == []


def test_the_engine_imports_no_paper():
    bad = {m: sorted(t for t in GRAPH[m] if is_paper(t)) for m in ENGINE}
    assert {m: t for m, t in bad.items() if t} == {}


def test_a_paper_uses_only_the_public_api_of_verify():
    for m in MODULES:
        if is_paper(m):
            engine = sorted(t for t in GRAPH[m] if t.startswith("fedbound.verify")
                            and t != API and not is_paper(t))
            assert engine == [], m


def _floors(graph: dict[str, set[str]], inside: list[str]) -> dict[str, int]:
    """Floor of each module of ``inside``: 1 + the highest floor it imports from ``inside``."""
    members, floors = set(inside), {}

    def floor(m):
        if m not in floors:
            floors[m] = 1 + max((floor(t) for t in graph[m] if t in members), default=0)
        return floors[m]

    for m in inside:
        floor(m)
    return floors


def test_the_engine_is_at_most_eight_floors_deep():
    floors = _floors(GRAPH, ENGINE)
    assert max(floors.values()) <= MAX_FLOORS, sorted(floors.items(), key=lambda x: -x[1])[:5]


#: calls whose string arguments are help texts (a usage example there is prose)
HELP_CALLS = ("Command", "add_argument", "add_parser")


def _named_in_code(path: Path, pattern: re.Pattern = PAPER_NAME) -> list[str]:
    """What ``pattern`` finds (default: paper names) in a module's code: identifiers,
    attribute names and string constants that are not docstrings or help texts (a usage
    example in either is prose)."""
    tree = ast.parse(path.read_text())
    docs = {id(node.body[0].value) for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and node.body and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)}
    examples = set()
    for node in ast.walk(tree):  # help texts: EXAMPLE(S) = ..., Command(...), add_argument(...)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.startswith("EXAMPLE")
                                                for t in node.targets):
            examples |= {id(n) for n in ast.walk(node.value)}
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) \
                in HELP_CALLS:
            examples |= {id(n) for arg in [*node.args, *node.keywords] for n in ast.walk(arg)
                         if isinstance(n, ast.Constant)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) not in docs and id(node) not in examples:
                found += pattern.findall(node.value)
        elif isinstance(node, ast.Name):
            found += pattern.findall(node.id)
        elif isinstance(node, ast.Attribute):
            found += pattern.findall(node.attr)
    return found


@pytest.mark.parametrize("module", ENGINE)
def test_no_generic_module_names_a_paper(module):
    assert _named_in_code(MODULES[module]) == []


def test_the_name_finder_sees_a_paper_in_code(tmp_path):
    src = tmp_path / "m.py"
    src.write_text('"""mllsgd in a docstring is prose."""\nKEYS = {"hfl.theorem2": 1}\n'
                   'EXAMPLES = "fedbound check afl.theorem3"\ntdcd = 2\n'
                   'p.add_argument("key", help="e.g. mllsgd.theorem1")\n')
    assert sorted(_named_in_code(src)) == ["hfl", "tdcd"]


# ---------------------------------------------------------------------- nothing lists the papers


def _paper_keys() -> list[str]:
    """The keys of the results fedbound's papers register: those registered by the plugins
    that ship with fedbound (loaded here as every command loads them)."""
    from fedbound import bounds
    from fedbound.verify.plugins import builtin, owner

    return sorted(k for k in bounds.keys() if owner(bounds.registry.origin(k), builtin()))


PAPER_KEYS = _paper_keys()
#: a paper's theorem key in a text (not a longer key that starts with it)
PAPER_KEY = re.compile(r"(?<![\w.])(?:" + "|".join(map(re.escape, PAPER_KEYS)) + r")(?![\w])")
PREFIXES = sorted({k.partition(".")[0] for k in PAPER_KEYS})


def is_papers_own(module: str) -> bool:
    """A paper's plugin (``verify.papers.<paper>``) or its mathematics or algorithm: a module
    of ``bounds`` or ``sim`` named after the paper (``bounds.hfl``, ``bounds.hfl_sync``,
    ``sim.hfl``)."""
    if is_paper(module):
        return True
    package, _, name = module.rpartition(".")
    return package in ("fedbound.bounds", "fedbound.sim") and any(
        name == p or name.startswith(f"{p}_") for p in PREFIXES)


CORE = sorted(m for m in MODULES if not is_papers_own(m))


def test_the_core_is_what_the_papers_are_not():
    assert len(PAPER_KEYS) >= 17 and PREFIXES == ["afl", "hfl", "mllsgd", "tdcd"]
    assert {"fedbound.bounds.registry", "fedbound.bounds.tuning", "fedbound.sim.problems",
            "fedbound.verify.adapter", "fedbound.verify.tightness"} <= set(CORE)
    assert not {"fedbound.bounds.hfl", "fedbound.bounds.hfl_sync", "fedbound.sim.afl",
                f"{PAPERS}.tdcd.theorems"} & set(CORE)
    assert not any(m.startswith(f"{PAPERS}.") for m in CORE)


@pytest.mark.parametrize("module", CORE)
def test_no_core_module_names_a_papers_theorem_key(module):
    """Nothing in the core lists the papers' results: their keys appear only in their
    plugins (their registration, adapters, claims) and in their own modules of bounds and
    sim; in the core, at most in prose (docstrings, help texts)."""
    assert _named_in_code(MODULES[module], PAPER_KEY) == []


def test_the_key_finder_sees_a_key_in_code(tmp_path):
    src = tmp_path / "m.py"
    src.write_text('"""hfl.theorem2 in a docstring is prose."""\nDEFAULT = "hfl.theorem2"\n'
                   'OTHER = ("mllsgd.theorem1_limit", "hfl.theorem2x", "bounds/hfl.py")\n'
                   'p.add_argument("key", help="e.g. afl.theorem3")\n')
    assert sorted(_named_in_code(src, PAPER_KEY)) == ["hfl.theorem2", "mllsgd.theorem1_limit"]

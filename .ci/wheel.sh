#!/usr/bin/env bash
# The wheel is the product (issue 15, item 2): build the wheel, install it with the pinned
# constraints into a fresh virtual environment outside the clone, and use it from a temporary
# directory as a new user would: --version, list, bound, check on a result and on a shipped
# witness, every package file that its sources name (fedbound's derivations, ...), and the
# quick-start notebook. Run alone with `.ci/wheel.sh`; `.ci/run` calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
clone="$PWD"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

"$PYTHON" -m pip wheel --quiet --no-deps --wheel-dir "$work/dist" .
"$PYTHON" -m venv "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install --quiet --upgrade pip
"$py" -m pip install --quiet -c constraints.txt torch==2.13.0
wheel="$(ls "$work"/dist/fedbound-*.whl)"
# the data extra (scikit-learn's digits) for the README's `fedbound reproduce`
"$py" -m pip install --quiet -c constraints.txt "${wheel}[data]" nbclient nbformat ipykernel

mkdir "$work/run" && cd "$work/run"   # nothing of the clone on sys.path from here on
export PATH="$work/venv/bin:$PATH" XDG_CACHE_HOME="$work/cache"
set -x
fedbound --version
fedbound list > /dev/null
fedbound bound mllsgd.theorem1 --params '{"L": 1, "beta": 0, "sigma": 1, "Delta": 1,
  "eta": 0.001, "K": 64, "q": 2, "tau": 4, "zeta": 0.5, "a": [0.5, 0.5], "p": [1, 0.9]}'
fedbound check mllsgd.theorem1 --exact --strict
witness="$("$py" -c "from fedbound import verify; print(next(w.source for w in verify.witnesses('afl.theorem3') if w.variant == 'proof'))")"
case "$witness" in "$clone"/*) echo "witness read from the clone: $witness"; exit 1 ;; esac
status=0; fedbound check afl.theorem3 --scenario "$witness" --exact || status=$?
test "$status" -eq 1   # the stored refutation still violates the bound
status=0; fedbound check afl.theorem3 --witness proof --exact || status=$?   # as the README
test "$status" -eq 1
"$py" - <<'PY'  # every file of the package that its sources name (derivations, ...) is installed
import importlib.util, pathlib, re
pattern = re.compile(r"\b(bounds|sim|verify)/([\w/.-]+\.(?:md|json|html|txt|css))\b")
roots = {p: pathlib.Path(importlib.util.find_spec(f"fedbound.{p}").origin).parent
         for p in ("bounds", "sim", "verify")}
named = {m.groups() for root in roots.values() for src in root.rglob("*.py")
         for m in pattern.finditer(src.read_text())}
missing = sorted(f"{pkg}/{rel}" for pkg, rel in named if not (roots[pkg] / rel).is_file())
assert ("bounds", "derivations/hfl_refined.md") in named and not missing, missing
print(f"the wheel carries the {len(named)} package files its sources name")
PY
cp "$clone/notebooks/00_quickstart.ipynb" .
"$py" - <<'PY'
import nbclient, nbformat
nb = nbformat.read("00_quickstart.ipynb", as_version=4)
nbclient.NotebookClient(nb, timeout=120, kernel_name="python3").execute()
PY
# every README command, run as written by tests/test_readme.py against this installed wheel
# (the test itself runs in the test environment of `make test`)
cd "$clone"
FEDBOUND_README_PYTHON="$py" "${TEST_PYTHON:-.venv/bin/python}" -m pytest -q -p no:cacheprovider \
  tests/test_readme.py
echo "wheel job: ok"

#!/usr/bin/env bash
# The wheel is the product (issue 15, item 2): build the wheel, install it with the pinned
# constraints into a fresh virtual environment outside the clone, and use it from a temporary
# directory as a new user would: --version, list, bound, check on a result and on a shipped
# witness, every package file that its sources name (fedbound's derivations, ...), and the
# quick-start notebook. The build and the install print no warning, the installed wheel adds
# no top-level name but fedbound and pytest_fedbound, and its commands print no warning
# (issue 30, item 2). Run alone with `.ci/wheel.sh`; `.ci/run` calls it.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
clone="$PWD"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# run a command with its output in a log, and fail where it fails or its output warns
# (pip's notices about the machine aside: running as root in a container, a newer pip, an
# index folder of its configuration that lacks a package)
warning_free() {
  local log="$work/$1.log"; shift
  "$@" > "$log" 2>&1 || { cat "$log"; exit 1; }
  if grep -v -e "Running pip as the 'root' user" -e '^\[notice\]' \
       -e "^WARNING: Location '[^']*' is ignored" "$log" | grep -i -n 'warn'; then
    echo "$log: warnings above"; exit 1
  fi
}
# verbose, so that the build backend's own output (setuptools' warnings) is in the log;
# PYTHONDONTWRITEBYTECODE, where the environment sets it, only makes setuptools warn that it
# skips byte-compiling
PYTHONDONTWRITEBYTECODE= warning_free build "$PYTHON" -m pip wheel -v --no-deps --wheel-dir "$work/dist" .
"$PYTHON" -m venv "$work/venv"
py="$work/venv/bin/python"
"$py" -m pip install --quiet --upgrade pip
"$py" -m pip install --quiet -c constraints.txt torch==2.13.0
wheel="$(ls "$work"/dist/fedbound-*.whl)"
# the data extra (scikit-learn's digits) for the README's `fedbound reproduce`
warning_free install "$py" -m pip install -c constraints.txt "${wheel}[data]"
"$py" -m pip install --quiet -c constraints.txt nbclient nbformat ipykernel

mkdir "$work/run" && cd "$work/run"   # nothing of the clone on sys.path from here on
export PATH="$work/venv/bin:$PATH" XDG_CACHE_HOME="$work/cache"
"$py" - <<'PY'  # the wheel's only top-level names: the fedbound package and its pytest plugin
from importlib.metadata import distribution
tops = set()
for f in distribution("fedbound").files:
    head = f.parts[0]
    if head == ".." or head.endswith(".dist-info"):   # the console script, the metadata
        continue
    tops.add(f.stem.split(".")[0] if head == "__pycache__" else f.parts[0].removesuffix(".py"))
assert tops == {"fedbound", "pytest_fedbound"}, f"top-level names installed: {sorted(tops)}"
import importlib.util
stray = [n for n in ("bounds", "sim", "verify") if importlib.util.find_spec(n) is not None]
assert not stray, f"importable outside fedbound: {stray}"
print("the wheel installs the top-level names fedbound and pytest_fedbound alone")
PY
# what the commands below print on standard error, checked for warnings before the README's
exec 3>&2 2> >(tee "$work/stderr.log" >&3)
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
status=0; fedbound check afl.theorem3 --witness proof --exact || status=$?   # as docs/quickstart.md
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
set +x
if grep -n 'Warning' "$work/stderr.log"; then echo "the installed wheel's commands warned (above)"; exit 1; fi
exec 2>&3
# every README command, run as written by tests/test_readme.py against this installed wheel
# (the test itself runs in the test environment of `make test`)
cd "$clone"
FEDBOUND_README_PYTHON="$py" "${TEST_PYTHON:-.venv/bin/python}" -m pytest -q -p no:cacheprovider -n auto \
  tests/test_readme.py
echo "wheel job: ok"

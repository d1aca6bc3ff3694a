"""Stored witnesses: scenarios on which a result's bound is known to fail, or is tightest,
shipped and replayed.

A witness is one JSON file::

    {"key": "afl.theorem3", "variant": "proof", "exact": true, "expect": "violated",
     "note": "x_0 = x*, sigma_L = 0, K = 1, m < M: ...", "scenario": {...}}

with an optional ``"ratio"``: the ratio measured/bound recorded at the scenario
(:func:`verify.verdict.tightness`). A *refutation* expects "violated"; a *tightness
witness* (``fedbound search --objective tightest``) expects the outcome it had ("holds"
for a true bound) and records the tightest ratio known for its result.

Each plugin adds its directory with :func:`register_witness_dir` (fedbound's papers ship
theirs in ``verify/papers/<paper>/witnesses/``, inside the wheel). ``fedbound check --all``
replays every witness as its own row (``verify.check(key, witness)`` replays one): the
expected outcome observed (and, with a recorded ratio, a ratio that did not drop:
:meth:`Witness.ratio_dropped`) reproduces it; anything else means the witness went stale
(for example because the encoding changed) and fails the run.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from .output import write_text
from .plugins import ensure_loaded, note
from .scenario import json_text
from .verdict import OUTCOMES, ratio_dropped

FIELDS = ("key", "variant", "exact", "expect", "note", "scenario")
#: fields a witness may have besides FIELDS
OPTIONAL = ("ratio",)
_DIRS: list = []


@dataclass(frozen=True)
class Witness:
    """A stored scenario and the outcome it must keep producing (``expect``)."""

    key: str
    variant: str
    exact: bool
    expect: str
    note: str
    scenario: dict[str, Any]
    ratio: float | None = None
    source: str = ""

    @classmethod
    def from_dict(cls, data: Any, source: str = "") -> Witness:
        where = f"witness {source}: " if source else "witness: "
        if not isinstance(data, dict):
            raise ValueError(f"{where}must be a JSON object with fields {list(FIELDS)}")
        unknown = sorted(set(data) - set(FIELDS) - set(OPTIONAL))
        missing = sorted(set(FIELDS) - set(data))
        if unknown or missing:
            raise ValueError(f"{where}unknown field(s) {unknown}, missing {missing}; fields are "
                             f"{list(FIELDS)} and optionally {list(OPTIONAL)}")
        for name, kind in (("key", str), ("variant", str), ("note", str), ("exact", bool),
                           ("scenario", dict)):
            if not isinstance(data[name], kind):
                raise ValueError(f"{where}{name}={data[name]!r} must be a {kind.__name__}")
        if data["expect"] not in OUTCOMES:
            raise ValueError(f"{where}expect={data['expect']!r} must be one of {OUTCOMES}")
        ratio = data.get("ratio")
        if ratio is not None and (isinstance(ratio, bool) or not isinstance(ratio, (int, float))
                                  or not math.isfinite(ratio) or ratio < 0):
            raise ValueError(f"{where}ratio={ratio!r} must be a finite number >= 0")
        return cls(**data, source=source)

    @classmethod
    def read(cls, path: str | Path) -> Witness:
        try:
            text = Path(path).read_text()
        except OSError as e:
            raise ValueError(f"witness {path}: {e.strerror}") from None
        try:
            return cls.from_dict(json.loads(text), source=str(path))
        except json.JSONDecodeError as e:
            raise ValueError(f"witness {path} is not valid JSON: {e.msg} at line {e.lineno}") from None

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        del d["source"]
        if d["ratio"] is None:
            del d["ratio"]
        return d

    def write(self, path: str | Path) -> Path:
        """Write the witness as JSON (the format :meth:`read` takes), atomically
        (``verify.output.write_text``)."""
        return write_text(path, json_text(self.as_dict()) + "\n")

    def ratio_dropped(self, verdict: Mapping[str, Any]) -> bool:
        """Whether a replay's verdict (``Verdict.as_dict()``) fell below the recorded ratio by
        more than round-off (exact: ``RATIO_RTOL``) or Monte-Carlo noise (the recorded ratio
        lies above the replay's 95% interval); False when no ratio is recorded."""
        return ratio_dropped(self.ratio, verdict)

    @property
    def label(self) -> str:
        return f"witness {Path(self.source).name}" if self.source else "witness"


def _is_witness_dict(data) -> bool:
    return isinstance(data, dict) and set(FIELDS) <= set(data) <= set(FIELDS) | set(OPTIONAL)


def as_witness(data) -> Witness | None:
    """``data`` as a Witness when it is one (an object, a mapping with exactly the witness
    fields, or the path of such a JSON file), else None."""
    if isinstance(data, Witness):
        return data
    if _is_witness_dict(data):
        return Witness.from_dict(data)
    if isinstance(data, (str, Path)) and not str(data).lstrip().startswith("{") \
            and str(data).endswith(".json") and Path(data).is_file():
        try:
            parsed = json.loads(Path(data).read_text())
        except (OSError, json.JSONDecodeError):
            return None
        if _is_witness_dict(parsed):
            return Witness.from_dict(parsed, source=str(data))
    return None


def register_witness_dir(path) -> None:
    """Add a directory of witness files (a plugin's ``witnesses/``, for example
    ``importlib.resources.files(__package__) / "witnesses"``)."""
    if path not in _DIRS:
        _DIRS.append(path)
        note("witness_dirs", str(path))


def unregister_witness_dir(path) -> None:
    """Remove a directory added by :func:`register_witness_dir`."""
    if path in _DIRS:
        _DIRS.remove(path)


def witness_dirs() -> list:
    """The registered witness directories (the plugins loaded), in registration order."""
    ensure_loaded()
    return list(_DIRS)


def witnesses(key: str | None = None) -> list[Witness]:
    """Every stored witness (of ``key`` when given), sorted by key, variant and file name."""
    ensure_loaded()
    found = []
    for d in _DIRS:
        if not d.is_dir():
            continue
        for f in d.iterdir():
            if f.name.endswith(".json"):
                try:
                    w = Witness.from_dict(json.loads(f.read_text()), source=str(f))
                except json.JSONDecodeError as e:
                    raise ValueError(f"witness {f} is not valid JSON: {e.msg}") from None
                if key is None or w.key == key:
                    found.append(w)
    return sorted(found, key=lambda w: (w.key, w.variant, w.source))

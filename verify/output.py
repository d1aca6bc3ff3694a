"""Safe outputs: every path is checked before any work, every file is written to a temporary
name and renamed into place, and nothing outside fedbound's own files is touched.

* :func:`check_file` and :func:`check_dir` refuse, before a check runs, an output that
  cannot be written (a directory given for a file, a missing or unwritable directory, a
  file given for a directory, a directory that holds someone else's files).
* :func:`atomic` and :func:`write_text` write a file under a temporary name in its
  directory and rename it over the target: a reader never sees half a file, an
  interrupted write leaves the previous file, and a symbolic link at the target is
  replaced, never followed (its target is untouched).
* :class:`ReportDir` is a report directory. It is created, or, if it exists, it must be
  empty or a previous fedbound report, recognised by the manifest fedbound writes into it
  (``MANIFEST``); anything else needs ``force``. The manifest lists the files of the
  report, so that a new report over an old one removes the old report's files it does not
  write again, and nothing else.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

#: the file that marks a directory as a fedbound report
MANIFEST = "fedbound-report.json"
#: image formats ``--plot`` writes (matplotlib picks the format from the name)
IMAGE_SUFFIXES = (".png", ".pdf", ".svg", ".jpg", ".jpeg")


class OutputError(ValueError):
    """An output path that cannot be used (exit status 2 in the CLI)."""


def _probe(directory: Path, what: str) -> None:
    """Create and remove a file in ``directory``: the one test of writability that holds for
    every user and file system (``os.access`` answers yes to root on a read-only mount)."""
    probe = directory / f".fedbound-probe-{secrets.token_hex(6)}"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        probe.unlink()
    except OSError as e:
        raise OutputError(f"{what}: cannot write in {directory} ({e.strerror})") from None


def check_file(path: str | os.PathLike, flag: str, *, suffixes: tuple[str, ...] = ()) -> Path:
    """The output file ``path`` of option ``flag``, refused (OutputError naming the option)
    when it cannot be written: a directory, a name without one of ``suffixes``, a missing
    or unwritable directory, or an existing thing that is not a regular file or a link."""
    p = Path(path)
    if str(path).endswith(os.sep) or p.is_dir():
        raise OutputError(f"{flag} {path} is a directory: give a file name")
    if suffixes and p.suffix.lower() not in suffixes:
        raise OutputError(f"{flag} {path}: give a file name ending in {', '.join(suffixes)}")
    if not p.parent.is_dir():
        raise OutputError(f"{flag} {path}: the directory {p.parent} does not exist")
    if p.exists() and not (p.is_symlink() or p.is_file()):
        raise OutputError(f"{flag} {path} exists and is not a regular file")
    _probe(p.parent, f"{flag} {path}")
    return p


def _tmp_name(target: Path) -> Path:
    """A fresh hidden name next to ``target``, with its suffix (matplotlib reads the format
    from it)."""
    return target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp{target.suffix}")


@contextlib.contextmanager
def atomic(path: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; when the block ends normally and the file
    exists, rename it over ``path`` (a link at ``path`` is replaced, not followed). On an
    exception the temporary file is removed and ``path`` is left as it was."""
    target = Path(path)
    tmp = _tmp_name(target)
    try:
        yield tmp
        if tmp.exists():
            os.chmod(tmp, 0o644)
            os.replace(tmp, target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_text(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` to ``path`` atomically (:func:`atomic`); the temporary file is created
    exclusively and without following links."""
    with atomic(path) as tmp:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    return Path(path)


def _manifest(directory: Path) -> dict | None:
    """The manifest of a previous fedbound report in ``directory``, or None."""
    m = directory / MANIFEST
    if m.is_symlink() or not m.is_file():
        return None
    try:
        data = json.loads(m.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("fedbound") == "report" else None


def check_dir(path: str | os.PathLike, flag: str, *, force: bool = False) -> Path:
    """The report directory ``path`` of option ``flag``, refused (OutputError) before any
    work when it is a file, cannot be created or written, or holds files that are not a
    previous fedbound report (unless ``force``)."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise OutputError(f"{flag} {path} exists and is not a directory: give a directory name")
    if not p.exists():
        parent = next((q for q in p.absolute().parents if q.exists()), None)
        if parent is None or not parent.is_dir():
            raise OutputError(f"{flag} {path}: no existing directory above it")
        _probe(parent, f"{flag} {path}")
        return p
    _probe(p, f"{flag} {path}")
    if not force and any(p.iterdir()) and _manifest(p) is None:
        raise OutputError(f"{flag} {path} is not empty and is not a fedbound report (it has no "
                          f"{MANIFEST}): give a new or empty directory, or --force to write into it")
    return p


class ReportDir:
    """A report directory being written (module docstring): ``open`` it, write files with
    :meth:`write_text` or :meth:`target`, then :meth:`finish`. ``kind`` names the report
    ("check-all", "sweep") in the manifest."""

    def __init__(self, path: str | os.PathLike, *, kind: str, force: bool = False):
        self.path = check_dir(path, "report directory", force=force)
        self.kind = kind
        self.files: list[str] = []
        self._previous: list[str] = []

    def open(self) -> ReportDir:
        """Create the directory and mark it as a fedbound report (before any file of it)."""
        self.path.mkdir(parents=True, exist_ok=True)
        old = _manifest(self.path)
        self._previous = [f for f in (old or {}).get("files", []) if isinstance(f, str)]
        self._write_manifest(complete=False)
        return self

    def _write_manifest(self, *, complete: bool) -> None:
        write_text(self.path / MANIFEST, json.dumps(
            {"fedbound": "report", "kind": self.kind, "complete": complete,
             "files": sorted(set(self.files))}, indent=2) + "\n")

    def _target(self, rel: str) -> Path:
        """The path of ``rel`` inside the report, its directories made real: a link or a file
        where a directory of the report belongs is replaced by a directory."""
        target = self.path / rel
        here = self.path
        for part in Path(rel).parts[:-1]:
            here = here / part
            if here.is_symlink() or (here.exists() and not here.is_dir()):
                here.unlink()
            here.mkdir(exist_ok=True)
        if target.is_dir() and not target.is_symlink():
            raise OutputError(f"{target} is a directory where the report writes a file")
        self.files.append(rel)
        return target

    def write_text(self, rel: str, text: str) -> Path:
        """Write the report's file ``rel`` (a path inside the report) atomically."""
        return write_text(self._target(rel), text)

    @contextlib.contextmanager
    def target(self, rel: str) -> Iterator[Path]:
        """Yield a temporary path for the report's file ``rel`` (for writers that take a path,
        such as ``savefig``); renamed into place when the block ends, if it was written."""
        with atomic(self._target(rel)) as tmp:
            yield tmp

    def finish(self, *, complete: bool = True) -> Path:
        """Write the manifest (``complete``: False for an interrupted report) and remove the
        files of the previous report in this directory that this one did not write again
        (regular files only, never a link's target, never a file the previous manifest did
        not list)."""
        self._write_manifest(complete=complete)
        keep = set(self.files) | {MANIFEST}
        for rel in self._previous:
            p = self.path / rel
            if rel in keep or ".." in Path(rel).parts or Path(rel).is_absolute():
                continue
            with contextlib.suppress(OSError):
                if p.is_symlink() or stat.S_ISREG(p.lstat().st_mode):
                    p.unlink()
        return self.path

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

from .scenario import BAD_PATHS

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


@contextlib.contextmanager
def _named(path, flag: str) -> Iterator[None]:
    """A path the system cannot even look at (a name too long, a loop of links) refused as
    bad input naming ``flag``."""
    try:
        yield
    except OSError as e:
        if e.errno not in BAD_PATHS:
            raise
        raise OutputError(f"{flag} {str(path)[:200]}: {e.strerror}") from None


def check_file(path: str | os.PathLike, flag: str, *, suffixes: tuple[str, ...] = ()) -> Path:
    """The output file ``path`` of option ``flag``, refused (OutputError naming the option)
    when it cannot be written: a directory, a name without one of ``suffixes``, a missing
    or unwritable directory, or an existing thing that is not a regular file or a link."""
    with _named(path, flag):
        return _check_file(path, flag, suffixes)


def _check_file(path, flag: str, suffixes: tuple[str, ...]) -> Path:
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


#: the largest manifest fedbound reads back (a report of many thousands of files is smaller)
MANIFEST_MAX = 4 * 2**20
#: flags of a directory opened without following a link
_DIR = (os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_CLOEXEC", 0))


def _parts(rel) -> list[str] | None:
    """The components of ``rel``, a path inside a report as the manifest lists it, or None
    when it is not one: not a string, empty, absolute, or holding an empty, ``.`` or ``..``
    component or a NUL (the manifest is data read from disk, and anything may be in it)."""
    if not isinstance(rel, str) or not rel or "\0" in rel or rel.startswith("/") or len(rel) > 4096:
        return None
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return None
    return parts


def _walk(root: int, parts: list[str], *, create: bool) -> int | None:
    """A descriptor of the directory ``parts`` inside the directory ``root`` (a descriptor),
    each component opened without following a link. ``create``: a missing component is
    made, and a link or a file where a directory belongs is removed (as a link, never its
    target) and replaced by a directory; otherwise None when a component is missing, a
    link or not a directory. The caller closes the descriptor."""
    fd = os.dup(root)
    try:
        for part in parts:
            try:
                child = os.open(part, _DIR, dir_fd=fd)
            except OSError:
                try:
                    st = os.stat(part, dir_fd=fd, follow_symlinks=False)
                except FileNotFoundError:
                    st = None
                if not create or (st is not None and stat.S_ISDIR(st.st_mode)):
                    if create:
                        raise
                    os.close(fd)
                    return None
                if st is not None:  # a link or a file in the way: removed as such
                    os.unlink(part, dir_fd=fd)
                os.mkdir(part, 0o755, dir_fd=fd)
                child = os.open(part, _DIR, dir_fd=fd)
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def _manifest(directory: Path | int) -> dict | None:
    """The manifest of a previous fedbound report in ``directory`` (a path, or a descriptor
    of it), or None: read without following a link, at most :data:`MANIFEST_MAX` bytes,
    parsed strictly; its ``files`` are kept only where each is a path inside the report
    (:func:`_parts`)."""
    from .scenario import parse_json

    try:
        root = directory if isinstance(directory, int) else os.open(directory, _DIR)
    except OSError:
        return None
    try:
        fd = os.open(MANIFEST, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
                     | getattr(os, "O_CLOEXEC", 0), dir_fd=root)
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return None
            data = parse_json(f.read(MANIFEST_MAX + 1).decode("utf-8"), MANIFEST)
    except (OSError, ValueError):
        return None
    finally:
        if not isinstance(directory, int):
            os.close(root)
    if not isinstance(data, dict) or data.get("fedbound") != "report":
        return None
    files = data.get("files")
    return {**data, "files": [f for f in (files if isinstance(files, list) else []) if _parts(f)]}


def check_dir(path: str | os.PathLike, flag: str, *, force: bool = False) -> Path:
    """The report directory ``path`` of option ``flag``, refused (OutputError) before any
    work when it is a file, cannot be created or written, or holds files that are not a
    previous fedbound report (unless ``force``)."""
    with _named(path, flag):
        return _check_dir(path, flag, force)


def _check_dir(path, flag: str, force: bool) -> Path:
    p = Path(path)
    if p.is_symlink():
        raise OutputError(f"{flag} {path} is a symbolic link: give the directory itself (fedbound "
                          "writes and removes files only inside a directory it reaches without "
                          "following a link)")
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
    ("check-all", "sweep") in the manifest.

    Every file is reached from a descriptor of the report directory, opened once without
    following a link (a link given as the report directory is refused), one component at a
    time, each without following a link (:func:`_walk`): what fedbound writes or removes is
    inside the report whatever links the report holds or gains meanwhile (a link in the way
    is removed as a link, never followed)."""

    def __init__(self, path: str | os.PathLike, *, kind: str, force: bool = False):
        self.path = check_dir(path, "report directory", force=force)
        self.kind = kind
        self.files: list[str] = []
        self._previous: list[str] = []
        self._fd: int | None = None

    def open(self) -> ReportDir:
        """Create the directory and mark it as a fedbound report (before any file of it)."""
        self.path.mkdir(parents=True, exist_ok=True)
        try:
            self._fd = os.open(self.path, _DIR)
        except OSError as e:
            raise OutputError(f"report directory {self.path}: cannot open it without following a "
                              f"link ({e.strerror})") from None
        old = _manifest(self._fd)
        self._previous = (old or {}).get("files", [])
        self._write_manifest(complete=False)
        return self

    def _write_manifest(self, *, complete: bool) -> None:
        self.write_text(MANIFEST, json.dumps(
            {"fedbound": "report", "kind": self.kind, "complete": complete,
             "files": sorted(set(self.files) - {MANIFEST})}, indent=2) + "\n")

    @contextlib.contextmanager
    def _directory(self, rel: str) -> Iterator[tuple[int, str]]:
        """(a descriptor of the directory of the report's file ``rel``, made real, and the
        file's name); the file is recorded in the manifest."""
        parts = _parts(rel)
        if parts is None:
            raise OutputError(f"{rel!r} is not a path inside a report")
        if self._fd is None:
            raise OutputError(f"report directory {self.path} is not open")
        fd = _walk(self._fd, parts[:-1], create=True)
        try:
            self.files.append(rel)
            yield fd, parts[-1]
        finally:
            os.close(fd)

    def _replace(self, fd: int, tmp: str, name: str, rel: str) -> None:
        """Rename the temporary file ``tmp`` over ``name`` in the directory ``fd`` (a link at
        ``name`` is replaced, not followed)."""
        try:
            os.replace(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except IsADirectoryError:
            raise OutputError(f"{self.path / rel} is a directory where the report writes a file") from None

    def write_text(self, rel: str, text: str) -> Path:
        """Write the report's file ``rel`` (a path inside the report) atomically."""
        with self._directory(rel) as (fd, name):
            tmp = _tmp_name(Path(name)).name
            out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                          | getattr(os, "O_CLOEXEC", 0), 0o644, dir_fd=fd)
            try:
                with os.fdopen(out, "w", encoding="utf-8") as f:
                    f.write(text)
                self._replace(fd, tmp, name, rel)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp, dir_fd=fd)
        return self.path / rel

    @contextlib.contextmanager
    def target(self, rel: str) -> Iterator[Path]:
        """Yield a temporary path for the report's file ``rel`` (for writers that take a path,
        such as ``savefig``); renamed into place when the block ends, if it was written. The
        path reaches the file's directory through its descriptor (``/proc/self/fd``) where
        the system has one."""
        with self._directory(rel) as (fd, name):
            tmp = _tmp_name(Path(name)).name
            here = Path(f"/proc/self/fd/{fd}")
            base = here if here.is_dir() else (self.path / rel).parent
            try:
                yield base / tmp
                try:
                    os.chmod(tmp, 0o644, dir_fd=fd)
                except FileNotFoundError:  # not written
                    return
                self._replace(fd, tmp, name, rel)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp, dir_fd=fd)

    def finish(self, *, complete: bool = True) -> Path:
        """Write the manifest (``complete``: False for an interrupted report) and remove the
        files of the previous report in this directory that this one did not write again:
        each reached component by component without following a link (a path that passes
        through a link is left alone), a regular file or a link (removed as a link) only,
        never a file the previous manifest did not list."""
        self._write_manifest(complete=complete)
        keep = set(self.files) | {MANIFEST}
        try:
            for rel in self._previous:
                if rel not in keep:
                    self._remove(_parts(rel))
        finally:
            self.close()
        return self.path

    def _remove(self, parts: list[str]) -> None:
        fd = _walk(self._fd, parts[:-1], create=False)
        if fd is None:  # missing, or through a link: not the report's any more
            return
        try:
            st = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
            if stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode):
                os.unlink(parts[-1], dir_fd=fd)
        except FileNotFoundError:
            pass
        finally:
            os.close(fd)

    def close(self) -> None:
        """Close the descriptor of the report directory (:meth:`finish` does)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __del__(self):
        self.close()

"""Report cleanup never leaves the report (issue 31, item 2): what fedbound deletes or
writes is reached from the report directory one component at a time without following a
link, whatever links the report holds, whatever its manifest (data read from disk) lists.
Each test plants a file outside the report that a followed link would reach, and checks it
is untouched."""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from fedbound.verify import output, sweep
from fedbound.verify.cli import main

TINY = {"key": "mllsgd.theorem1", "base": {"replicas": 4, "K": 8, "q": 2, "tau": 2},
        "grid": {"tau": [1, 2]}}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("store") / "s.sqlite"
    s = sweep.Store(path)
    sweep.run_sweep(sweep.SweepSpec.from_dict(TINY), s)
    s.close()
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path


@pytest.fixture(scope="module")
def bare(tmp_path_factory) -> Path:
    """A store of one error row: its report is index.html alone (no figure, quick)."""
    path = tmp_path_factory.mktemp("bare") / "bare.sqlite"
    sweep.Store(path).close()
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("INSERT INTO results VALUES ('d', 'mllsgd.theorem1', 'proof', 0, '{}', "
                     "NULL, 'an error', 0, 0)")
    return path


def report(store: Path, out: Path, capsys) -> int:
    code = main(["report", "--db", str(store), "--out", str(out)])
    capsys.readouterr()
    return code


def outside(tmp_path: Path) -> tuple[Path, dict[Path, str]]:
    """A directory outside the report holding files a followed link would reach, and their
    digests."""
    victim = tmp_path / "victim"
    victim.mkdir()
    for name in ("victim.txt", "index.html", "keep.png"):
        (victim / name).write_text(f"precious {name}")
    return victim, digests(victim)


def digests(directory: Path) -> dict[Path, str]:
    return {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.rglob("*"))
            if p.is_file()}


def manifest(out: Path) -> dict:
    return json.loads((out / output.MANIFEST).read_text())


def test_a_link_in_the_middle_of_a_listed_path_is_not_followed(store, bare, tmp_path, capsys):
    """The report's figures/ moved away and replaced by a link to it: the next report that
    writes no figure removes the old figures from its manifest through no link (the issue's
    case: they were deleted at the link's target)."""
    out = tmp_path / "rep"
    assert report(store, out, capsys) == 0
    figures = [f for f in manifest(out)["files"] if f.startswith("figures/")]
    assert figures
    moved = tmp_path / "moved"
    (out / "figures").rename(moved)
    (out / "figures").symlink_to(moved, target_is_directory=True)
    before = digests(moved)
    assert report(bare, out, capsys) == 0  # writes no figure: removes the old ones it lists
    assert digests(moved) == before  # the figures at the link's target are untouched
    assert (out / "figures").is_symlink()  # left as it was: not the report's any more


def test_a_link_as_the_report_directory_is_refused(bare, tmp_path, capsys):
    victim, before = outside(tmp_path)
    link = tmp_path / "rep"
    link.symlink_to(victim, target_is_directory=True)
    assert main(["report", "--db", str(bare), "--out", str(link), "--force"]) == 2
    assert "is a symbolic link" in capsys.readouterr().err
    assert digests(victim) == before and sorted(victim.iterdir()) == sorted(before)


@pytest.mark.parametrize("entry", [
    "../victim/victim.txt", "/{victim}/victim.txt", "extra/victim.txt", "extra/../../victim/victim.txt",
    "./extra/victim.txt", "figures//../../victim/victim.txt", "", "\0", 7, None, ["x"],
    "x" * 5000])
def test_a_crafted_manifest_deletes_nothing_outside_the_report(entry, bare, tmp_path, capsys):
    """The manifest is data from disk: an entry that is not a plain path inside the report
    (absolute, with ``..``, ``.`` or empty components, not a string) is ignored, and a
    plain one that passes through a link (``extra`` links outside) is left alone."""
    victim, before = outside(tmp_path)
    out = tmp_path / "rep"
    assert report(bare, out, capsys) == 0
    (out / "extra").symlink_to(victim, target_is_directory=True)
    (out / "mine.txt").write_text("listed, a regular file inside the report: removed")
    data = manifest(out)
    crafted = entry.replace("{victim}", str(victim).lstrip("/")) if isinstance(entry, str) else entry
    data["files"] += [crafted, "mine.txt"]
    (out / output.MANIFEST).write_text(json.dumps(data))
    assert report(bare, out, capsys) == 0
    assert digests(victim) == before
    assert not (out / "mine.txt").exists()  # the manifest is still honoured inside the report


def test_an_unreadable_manifest_is_no_manifest(bare, tmp_path, capsys):
    """A manifest that is a link, a directory, not JSON or of a repeated key is not a
    fedbound report's: the directory then needs --force, and nothing listed is removed."""
    victim, before = outside(tmp_path)
    for make in ("link", "directory", "garbage", "duplicate"):
        out = tmp_path / make
        out.mkdir()
        m = out / output.MANIFEST
        if make == "link":
            (victim / "fake.json").write_text(json.dumps({"fedbound": "report",
                                                          "files": ["../victim/victim.txt"]}))
            before = digests(victim)
            m.symlink_to(victim / "fake.json")
        elif make == "directory":
            m.mkdir()
        elif make == "garbage":
            m.write_bytes(b"\xff\xfe{")
        else:
            m.write_text('{"fedbound": "report", "fedbound": "report", "files": []}')
        assert main(["report", "--db", str(bare), "--out", str(out)]) == 2
        assert "is not a fedbound report" in capsys.readouterr().err
    assert digests(victim) == before


def test_a_directory_replaced_by_a_link_between_runs_is_replaced_not_followed(store, tmp_path, capsys):
    """Between two reports, figures/ (which the second writes again) becomes a link to a
    directory outside: the link is removed as a link and a real directory written in its
    place; nothing is written or deleted at its target."""
    victim, before = outside(tmp_path)
    out = tmp_path / "rep"
    assert report(store, out, capsys) == 0
    for p in (out / "figures").iterdir():
        (victim / p.name).write_text("precious, and named as a figure")
        p.unlink()
    (out / "figures").rmdir()
    (out / "figures").symlink_to(victim, target_is_directory=True)
    before = digests(victim)
    assert report(store, out, capsys) == 0
    assert digests(victim) == before
    assert not (out / "figures").is_symlink() and any((out / "figures").iterdir())


def test_writes_and_removals_go_through_the_descriptor_of_the_report(tmp_path):
    """A ReportDir opened, then its path replaced by a link elsewhere: it goes on writing
    into the directory it opened (now under another name), never through the link."""
    victim, before = outside(tmp_path)
    out = tmp_path / "rep"
    rep = output.ReportDir(out, kind="test").open()
    out.rename(tmp_path / "opened")
    out.symlink_to(victim, target_is_directory=True)
    rep.write_text("a/b/index.html", "fedbound")
    with rep.target("figures/f.png") as tmp:
        tmp.write_bytes(b"png")
    rep.finish()
    assert digests(victim) == before
    assert (tmp_path / "opened" / "a" / "b" / "index.html").read_text() == "fedbound"
    assert (tmp_path / "opened" / "figures" / "f.png").read_bytes() == b"png"
    assert sorted(json.loads((tmp_path / "opened" / output.MANIFEST).read_text())["files"]) == [
        "a/b/index.html", "figures/f.png"]

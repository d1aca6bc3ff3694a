"""The command line as a user meets it: ``fedbound`` alone, each command's ``--help`` (only
its own options and exit statuses, plain text), "did you mean" for a misspelt key or
variant, and progress on a terminal for the commands that take seconds."""

from __future__ import annotations

import io
import json
import re

import pytest

from fedbound import bounds
from fedbound.verify.cli import COMMANDS, main, parser
from fedbound.verify.cli.common import EVERY_COMMAND, EXIT_STATUS, LIMIT_OPTIONS

#: markup of reStructuredText or Markdown that a help text must not show
MARKUP = re.compile(r"``|`[^`\s][^`]*`|:(?:func|class|meth|mod|data|attr):")


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def help_text(capsys, *argv) -> str:
    with pytest.raises(SystemExit) as e:
        main([*argv, "--help"])
    assert e.value.code == 0
    return capsys.readouterr().out


def test_fedbound_alone_prints_usage_and_every_command(capsys):
    code, out, err = run(capsys)
    assert code == 2 and out == ""
    assert err.startswith("usage: fedbound ") and err.rstrip().endswith("a COMMAND is required")
    listed = dict(re.findall(r"^  (\S+)\s+(.+)$", err, re.M))
    assert listed == {name: c.help for name, c in COMMANDS.items()}


def test_top_level_help_lists_the_commands_and_every_exit_status(capsys):
    text = help_text(capsys)
    assert all(re.search(rf"^  {name}\s+{re.escape(c.help)}$", text, re.M)
               for name, c in COMMANDS.items())
    assert _statuses(text) == sorted(EXIT_STATUS)
    assert not MARKUP.search(text), MARKUP.search(text)


def _statuses(text: str) -> list[int]:
    """The exit statuses listed in a help text's "exit status:" block."""
    block = text.split("exit status:\n", 1)[1]
    return [int(c) for c in re.findall(r"^  (\d+) ", block, re.M)]


def _options(text: str) -> set[str]:
    return set(re.findall(r"^  (--[\w-]+)", text, re.M))


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_command_help_shows_its_own_options_and_statuses_without_markup(capsys, name):
    command = COMMANDS[name]
    text = help_text(capsys, name)
    assert not MARKUP.search(text), MARKUP.search(text)
    assert _statuses(text) == sorted({*command.exits, *EVERY_COMMAND})
    limits = {option for option, _, _ in LIMIT_OPTIONS.values()}
    shown = {LIMIT_OPTIONS[kind][0] for kind in command.limits}
    assert _options(text) & limits == shown
    assert "example:\n  fedbound " + name in text
    assert max(map(len, text.splitlines())) <= 100, "the help is wrapped for a terminal"


def test_statuses_a_command_returns_are_in_its_help(capsys):
    """Spot checks of the declared statuses: list has no 1 (it violates nothing) and 74 (its
    output's pipe may close, as every command's); check has 3 and 4; bound has 1
    (inadmissible parameters); sweep has 4 and no 1."""
    assert _statuses(help_text(capsys, "list")) == [0, 2, 70, 74, 130]
    assert {1, 3, 4} <= set(_statuses(help_text(capsys, "check")))
    assert 1 in _statuses(help_text(capsys, "bound"))
    assert 4 in _statuses(help_text(capsys, "sweep")) and 1 not in _statuses(help_text(capsys, "sweep"))


def test_hidden_resource_options_are_still_accepted(capsys):
    """A limit a command cannot exceed is not in its help but still accepted (the limits are
    process-wide settings, also accepted before the command)."""
    code, out, _ = run(capsys, "list", "--max-memory", "8G", "--json")
    assert code == 0 and json.loads(out)
    code, out, _ = run(capsys, "--max-steps", "1e12", "scenario", "afl.theorem3")
    assert code == 0 and json.loads(out)["T"] > 0


def test_chooser_help_shows_its_statuses_without_markup(capsys):
    text = help_text(capsys, "choose", "tdcd")
    assert not MARKUP.search(text) and _statuses(text) == [0, *EVERY_COMMAND]
    assert "--max-memory" in text and "--max-scenarios" not in text


def test_the_parser_has_a_command_for_each_module_command():
    sub = next(a for a in parser()._actions if a.dest == "command")
    assert set(sub.choices) == set(COMMANDS)


@pytest.mark.parametrize("argv, suggestion", [
    (["scenario", "mllsgd.theorm1"], "mllsgd.theorem1"),
    (["check", "afl.thoerem3", "--exact"], "afl.theorem3"),
    (["bound", "mllsgd.theorem1", "--variant", "prited", "--params", "{}"], "printed"),
    (["check", "afl.theorem3", "--witness", "prof"], "proof"),
    (["check", "--all", "--only", "tdcd.theorem", "--battery", "0"], "tdcd.theorem1"),
])
def test_a_near_miss_gets_a_suggestion(capsys, argv, suggestion):
    code, _, err = run(capsys, *argv)
    assert code == 2 and err.count("\n") == 1
    assert f"(did you mean {suggestion!r}?)" in err


def test_did_you_mean_in_the_library_and_nothing_far_off():
    with pytest.raises(ValueError, match=r"\(did you mean 'tight'\?\)"):
        bounds.get("mllsgd.theorem1", "tigth")
    with pytest.raises(ValueError) as e:
        bounds.get("something.else")
    assert "did you mean" not in str(e.value)


class Terminal(io.StringIO):
    """Standard error as a terminal (tqdm draws its bars only on one)."""

    def isatty(self) -> bool:
        return True


def on_terminal(capsys, monkeypatch, *argv) -> tuple[int, str]:
    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    code = main(list(argv))
    capsys.readouterr()
    return code, terminal.getvalue()


def test_check_shows_its_stages_on_a_terminal(capsys, monkeypatch, tmp_path):
    code, bar = on_terminal(capsys, monkeypatch, "check", "afl.theorem3", "--witness", "proof",
                            "--exact", "--plot", str(tmp_path / "f.png"))
    assert code == 1  # the stored refutation of its proof variant
    seen = re.findall(r"check afl\.theorem3 \((\d)/3, ([a-z ]+)\)", bar)
    assert [s for _, s in dict.fromkeys(seen)] == ["loading the simulator", "simulating",
                                                   "drawing the figure", "done"]
    code, bar = on_terminal(capsys, monkeypatch, "scenario", "afl.theorem3")
    assert code == 0 and bar == ""  # no bar where there is nothing to wait for


def test_no_progress_off_a_terminal(capsys):
    code, _, err = run(capsys, "check", "afl.theorem3", "--witness", "proof", "--exact", "--json")
    assert code == 1 and err == ""


@pytest.mark.parametrize("argv, pattern", [
    (["rate", "tdcd.remark5", "--values", "25,50,100"], r"rate tdcd\.remark5: 100%.*3/3"),
    (["search", "afl.theorem1", "--budget", "3"], r"search afl\.theorem1 \(violate\): 100%.*3/3"),
])
def test_long_commands_show_progress_on_a_terminal(capsys, monkeypatch, argv, pattern):
    code, bar = on_terminal(capsys, monkeypatch, *argv)
    assert code in (0, 1) and re.search(pattern, bar), bar[-500:]

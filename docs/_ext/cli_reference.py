"""The ``fedbound-cli`` directive: the command-line reference, generated from the argument
parsers themselves (``fedbound.verify.cli.command_parsers()``: the top-level parser, each
command's, and each registered chooser's), so that the reference says exactly what
``--help`` says.

One section per command line: its description, its usage, its options (those its ``--help``
shows: an option hidden there is hidden here), its example and its exit statuses, read from
the parser's epilog (``example:``, ``commands:`` and ``exit status:`` blocks of the form
``fedbound.verify.cli`` writes).

Use, in a MyST page::

    ```{fedbound-cli}
    ```
"""

from __future__ import annotations

import argparse
import re

from docutils import nodes
from docutils.parsers.rst import Directive
from sphinx.util.nodes import make_id

#: a block of an epilog: a heading line ("exit status:") and its indented lines
_BLOCK = re.compile(r"^(\w[\w ]*):\n((?:^ .*\n?)+)", re.M)
#: an entry of a list block: "  KEY  text" (an exit status, a command), continued by deeper lines
_ENTRY = re.compile(r"^  (\S+)\s+(.+(?:\n {5,}.+)*)", re.M)


def _text(text: str) -> nodes.paragraph:
    return nodes.paragraph(text=" ".join(text.split()))


def _literal(text: str, language: str = "text") -> nodes.literal_block:
    block = nodes.literal_block(text, text)
    block["language"] = language
    return block


def _entries(body: str, term=nodes.literal) -> nodes.definition_list:
    """A block of "KEY text" lines as a definition list."""
    out = nodes.definition_list()
    for key, text in _ENTRY.findall(body):
        out += nodes.definition_list_item(
            "", nodes.term("", "", term(key, key)), nodes.definition("", _text(text)))
    return out


def _invocation(action: argparse.Action) -> str:
    """How an argument is written: ``--budget BUDGET``, ``--objective {violate,tightest}``,
    ``key``."""
    if not action.option_strings:
        return action.metavar or action.dest
    if action.nargs == 0:
        return ", ".join(action.option_strings)
    metavar = action.metavar or (("{" + ",".join(map(str, action.choices)) + "}")
                                 if action.choices else action.dest.upper())
    return ", ".join(f"{o} {metavar}" for o in action.option_strings)


def _arguments(parser: argparse.ArgumentParser) -> nodes.definition_list:
    """The arguments that ``--help`` shows (not ``-h``, not the hidden ones)."""
    out = nodes.definition_list()
    for action in parser._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        if isinstance(action, argparse._SubParsersAction):
            continue
        text = (action.help or "") % {"default": action.default, "prog": parser.prog}
        out += nodes.definition_list_item(
            "", nodes.term("", "", nodes.literal(_invocation(action), _invocation(action))),
            nodes.definition("", _text(text or "-")))
    return out


def _rubric(text: str) -> nodes.rubric:
    return nodes.rubric(text=text)


def section(command: str, parser: argparse.ArgumentParser, document) -> nodes.section:
    """The reference section of one command line."""
    sec = nodes.section(ids=[make_id(document.settings.env, document, "", command)],
                        names=[nodes.fully_normalize_name(command)])
    sec += nodes.title(text=command)
    if parser.description:
        sec += _text(parser.description)
    sec += _literal(parser.format_usage().removeprefix("usage: ").strip(), "text")
    arguments = _arguments(parser)
    if arguments.children:
        sec += _rubric("Arguments")
        sec += arguments
    for heading, body in _BLOCK.findall(parser.epilog or ""):
        sec += _rubric(heading.capitalize())
        if heading == "example":
            sec += _literal("\n".join(line[2:] for line in body.rstrip().splitlines()), "sh")
        else:
            sec += _entries(body)
    return sec


class FedboundCli(Directive):
    """Every command line of ``fedbound`` (the registered plugins' choosers included)."""

    has_content = False

    def run(self):
        from fedbound.verify.cli import command_parsers

        document = self.state.document
        return [section(command, parser, document) for command, parser in command_parsers().items()]


def setup(app):
    app.add_directive("fedbound-cli", FedboundCli)
    return {"parallel_read_safe": True, "parallel_write_safe": True}

"""``fedbound scenario``: the default scenario of a result, as JSON."""

from __future__ import annotations

from .common import Command


def run(args):
    from ..adapter import default_scenario

    return default_scenario(args.key).to_dict()


def arguments(p) -> None:
    p.add_argument("key", help="registered result")


COMMANDS = (Command("scenario", run, "the default scenario of a result, as JSON", arguments,
                    "fedbound scenario mllsgd.theorem1 > s.json",
                    exits={0: "the scenario was printed"}),)

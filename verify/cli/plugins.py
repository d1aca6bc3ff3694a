"""``fedbound plugins``: every plugin (fedbound's papers like any other), its version, what it
registered, and each registration that breaks its contract (``verify.hooks``)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from .common import Command, Exit

#: names of one hook shown in the text before "..." (the JSON has them all)
SHOWN = 4


def _plugins() -> list[dict]:
    """One entry per plugin named anywhere (loaded or failed, in load order), then what no
    plugin registered (when there is some)."""
    from ..hooks import OUTSIDE, problems, registrations
    from ..plugins import failures, sources, version_of

    regs, found = registrations(), problems()
    failed = {f.module: f.message for f in failures()}
    out = []
    for module, where in sources():
        distribution, version = version_of(module)
        out.append({"module": module, "where": where, "distribution": distribution,
                    "version": version, "loaded": module not in failed,
                    "failure": failed.get(module), "registered": regs.get(module, {}),
                    "problems": [{k: p[k] for k in ("hook", "name", "problem")}
                                 for p in found if p["plugin"] == module]})
    if OUTSIDE in regs:
        out.append({"module": None, "where": "outside any plugin (a script, a test)",
                    "distribution": None, "version": None, "loaded": True, "failure": None,
                    "registered": regs[OUTSIDE],
                    "problems": [{k: p[k] for k in ("hook", "name", "problem")}
                                 for p in found if p["plugin"] == OUTSIDE]})
    return out


def _shown(names: list[str], folder: Path | None) -> str:
    """A hook's registrations on one line: paths inside the plugin's folder relative to it,
    at most :data:`SHOWN` names, then how many more."""
    def short(name: str) -> str:
        if folder is not None and name.startswith(f"{folder}/"):
            return name[len(str(folder)) + 1:]
        return name

    head = ", ".join(short(n) for n in names[:SHOWN])
    return head + (f", ... ({len(names)} in all)" if len(names) > SHOWN else "")


def _folder(module: str | None) -> Path | None:
    """The folder of a loaded plugin package (None: not a package, not loaded)."""
    path = getattr(sys.modules.get(module or ""), "__file__", None)
    return Path(path).parent if path and path.endswith("__init__.py") else None


def _text(entries: list[dict]) -> str:
    lines = []
    width = max(len(h) for e in entries for h in e["registered"]) if entries else 0
    for e in entries:
        version = "" if e["version"] is None else f", {e['distribution'] or 'version'} {e['version']}"
        lines.append(f"{e['module'] or '(no plugin)'}  ({e['where']}{version})")
        if e["failure"]:
            lines.append(f"  ! {e['failure']}")
        for hook, names in e["registered"].items():
            if names:
                lines.append(f"  {hook:<{width}}  {_shown(names, _folder(e['module']))}")
        if e["loaded"] and not any(e["registered"].values()):
            lines.append("  (registered nothing)")
        lines += [f"  ! {p['hook']} {p['name']}: {p['problem']}" for p in e["problems"]]
    broken = sum(len(e["problems"]) + bool(e["failure"]) for e in entries)
    lines.append(f"({sum(e['module'] is not None for e in entries)} plugins; "
                 + (f"{broken} problem(s), each marked !)" if broken else "every registration "
                    "keeps its contract: fedbound plugins --hooks lists them)"))
    return "\n".join(lines)


def _hooks_text() -> str:
    from ..hooks import HOOKS

    lines = []
    for h in HOOKS:
        lines.append(f"{h.name}: {h.call}")
        lines += textwrap.wrap(h.registers, 88, initial_indent="  ", subsequent_indent="  ")
        lines += [f"  - {c}" for c in h.contract]
    return "\n".join(lines)


def run(args):
    if args.hooks:
        from ..hooks import HOOKS

        if args.json:
            return [{"name": h.name, "register": h.call,
                     "registers": h.registers, "contract": list(h.contract)} for h in HOOKS]
        print(_hooks_text())
        return None
    entries = _plugins()
    status = 1 if any(e["problems"] or e["failure"] for e in entries) else 0
    if args.json:
        return Exit(entries, status)
    print(_text(entries))
    return Exit(None, status)


def arguments(p) -> None:
    p.add_argument("--hooks", action="store_true",
                   help="list the hooks a plugin may register, each with its contract, instead")


COMMANDS = (Command(
    "plugins", run, "every plugin, its version, what it registered and what breaks a contract",
    arguments, "fedbound plugins\n  fedbound --plugin fedbound_sgd plugins --json",
    description="Every plugin (fedbound's four papers, the installed packages of the entry-point "
                "group fedbound.plugins, FEDBOUND_PLUGINS and --plugin), where it was named, "
                "its version and what it registered through each hook of verify.hooks.HOOKS; "
                "a registration that breaks its hook's contract, and a plugin that failed to "
                "load, are marked !.",
    exits={0: "every plugin loaded and every registration keeps its contract (or --hooks)",
           1: "a plugin failed to load, or a registration breaks its contract"}),)

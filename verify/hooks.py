"""The hook specification: everything a plugin may register, each with its contract, declared
once (as pluggy's hook specifications declare what a pytest plugin may implement).

A plugin is a module whose import registers through these functions, and only these
(:data:`HOOKS`, in the order a paper's plugin calls them):

=================  ================================  ==============================================
hook               registered with                   one registration
=================  ================================  ==============================================
theorems           ``bounds.register``               a result: key, title, build, variants, statuses
adapters           ``register_adapter``              the adapter that checks one result
witness_dirs       ``register_witness_dir``          a folder of stored witnesses
tightness_tables   ``register_tightness``            the tightness table of the plugin's results
families           ``register_family``               a refutation family of a refuted result
sweeps             ``register_sweep``                a rate sweep of a result (``fedbound rate``)
choosers           ``register_chooser``              a chooser (``fedbound choose NAME``)
experiments        ``register_experiment``           the runs behind a paper's experimental claims
claims             ``register_claim``                one experimental claim and its decision
=================  ================================  ==============================================

Each :class:`Hook` says what a registration promises (``contract``). A register function
refuses what it can tell at once (a key registered twice, an adapter before its theorem);
the rest is checked afterwards by ``problems``, which ``fedbound plugins`` runs on every
registration of every plugin it lists, flagging each broken promise. Every registration
notes the module whose code made it (``verify.plugins.note``), so that
:func:`registrations` can say which plugin registered what.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields

from fedbound import bounds
from fedbound.bounds import registry

from .adapter import adapter_for, adapter_keys, register_adapter
from .choose import choosers, register_chooser
from .claims import claims, experiment, experiment_ids, register_claim, register_experiment
from .families import families, register_family
from .plugins import modules, origin, owner
from .rate import declared, register_sweep, sweep_name
from .tightness import read, register_tightness, tables, tracked
from .witnesses import Witness, register_witness_dir, witness_dirs


@dataclass(frozen=True)
class Hook:
    """One kind of registration: its ``name``, the function a plugin calls (``register``),
    what one registration adds (``registers``), what it promises (``contract``), the
    registrations made so far, by name (``registered()``), and the promises one of them
    breaks (``problems(name, obj)``, empty when it keeps them all)."""

    name: str
    register: Callable
    registers: str
    contract: tuple[str, ...]
    registered: Callable[[], Mapping[str, object]]
    problems: Callable[[str, object], list[str]]

    @property
    def call(self) -> str:
        """The register function as a plugin imports it: ``bounds.register`` or
        ``verify.api.register_...``."""
        where = "bounds" if self.register.__module__.startswith("fedbound.bounds") else "verify.api"
        return f"{where}.{self.register.__name__}"

    def origin(self, name: str) -> str:
        """The module whose code registered ``name``."""
        return registry.origin(name) if self.name == "theorems" else origin(self.name, name)


# ---------------------------------------------------------------------- the contracts


def _theorem_problems(key: str, _) -> list[str]:
    out = []
    if registry.registered_statuses(key) is None:
        out.append("no statuses registered: fedbound list must build every variant to list it; "
                   "give {variant: status}")
    if key not in adapter_keys():
        out.append("no adapter registered: no command can check it (register_adapter)")
    return out


def _adapter_problems(key: str, ad) -> list[str]:
    out = []
    if not ad.overrides("_footprint"):
        out.append("no _footprint: the resource limits cannot refuse an oversized scenario "
                   "before it runs")
    if not ad.overrides("_draw"):
        out.append("no _draw: check --all's battery, search and verify.strategies cannot draw "
                   "its scenarios")
    if ad.tags.estimated and not ad.overrides("_estimated_parts"):
        out.append("Tags(estimated=True) without _estimated_parts")
    try:
        ad.default_scenario().validate()
        ad.footprint(ad.default_scenario())
    except Exception as e:  # noqa: BLE001 - a broken registration is reported, not raised
        out.append(f"its default scenario fails: {type(e).__name__}: {e}")
    return out


def _witness_dir_problems(name: str, path) -> list[str]:
    if not path.is_dir():
        return [f"{name} is not a folder"]
    out = []
    for f in sorted(path.iterdir(), key=lambda f: f.name):
        if not f.name.endswith(".json"):
            continue
        try:
            w = Witness.read(str(f))
        except ValueError as e:
            out.append(str(e))
            continue
        if w.key not in bounds.keys() or w.variant not in bounds.variants(w.key):
            out.append(f"witness {f.name}: no result {w.key!r} [{w.variant}] is registered")
    return out


def _tightness_problems(name: str, path) -> list[str]:
    if not path.is_file():
        return [f"no table file {name}"]
    try:
        rows = read(path)
    except ValueError as e:
        return [str(e)]
    out = []
    for key, r in rows.items():
        statuses = registry.registered_statuses(key) if key in bounds.keys() else None
        if statuses is None:
            out.append(f"row {key}: no result {key!r} with registered statuses")
        elif (r.get("variant"), r.get("status")) != (registry.default(key), statuses[registry.default(key)]):
            out.append(f"row {key}: variant {r.get('variant')!r} with status {r.get('status')!r}, "
                       f"registered: {registry.default(key)!r} with {statuses[registry.default(key)]!r}")
    missing = [k for k in tracked().get(path, []) if k not in rows]
    if missing:
        out.append(f"no row for {', '.join(missing)} (regenerate it: verify.tightness.write())")
    return out


def _family_problems(key: str, family) -> list[str]:
    statuses = registry.registered_statuses(key) if key in bounds.keys() else None
    if statuses is None:
        return [f"no result {key!r} with registered statuses"]
    if statuses[registry.default(key)] not in bounds.REFUTED:
        return [f"its result is registered as {statuses[registry.default(key)]!r}, not refuted: "
                "a family along which the ratio grows without limit refutes it"]
    return [] if family.members else ["no members"]


def _sweep_problems(name: str, sweep) -> list[str]:
    key = name.partition(" over ")[0]
    if key not in adapter_keys():
        return [f"no adapter for {key!r}"]
    names = {f.name for f in fields(adapter_for(key).scenario_type)}
    return [] if sweep.field in names else [
        f"field {sweep.field!r} is not a field of {adapter_for(key).scenario_type.__name__}"]


def _chooser_problems(name: str, cls) -> list[str]:
    key = getattr(cls, "key", "")
    return [] if key in bounds.keys() else [f"its key {key!r} is not a registered result"]


def _experiment_problems(name: str, _) -> list[str]:
    return [] if any(c.experiment == name for c in claims()) else ["no claim uses it"]


def _claim_problems(name: str, claim) -> list[str]:
    return [] if claim.cite.strip() else ["no citation (cite: the paper and its own numbering)"]


HOOKS: tuple[Hook, ...] = (
    Hook("theorems", bounds.register,
         "a result: key, title, the function building each variant (or its import path), the "
         "variants with their statuses, the default variant",
         ("its key is 'prefix.name' and registered once (refused otherwise)",
          "the status of every variant is registered, so that listing builds nothing",
          "each variant builds a Theorem with that key, variant and status (bounds.get)",
          "an adapter is registered for it"),
         lambda: {k: None for k in bounds.keys()}, _theorem_problems),
    Hook("adapters", register_adapter,
         "the Adapter that checks one result: scenario type and default, _derive, _measure "
         "and the optional hooks",
         ("its theorem is registered first, once (refused otherwise)",
          "its default scenario validates and its footprint is estimated (_footprint)",
          "it draws random admissible scenarios (_draw)",
          "Tags(estimated=True) comes with _estimated_parts",
          "the contract checks of verify.testing.check_adapter pass"),
         lambda: {k: adapter_for(k) for k in adapter_keys()}, _adapter_problems),
    Hook("witness_dirs", register_witness_dir,
         "a folder of stored witnesses (a plugin's witnesses/, shipped as package data)",
         ("it is a folder", "every *.json in it is a witness of a registered result and variant",
          "each witness still produces its recorded outcome (check --all replays it)"),
         lambda: {str(d): d for d in witness_dirs()}, _witness_dir_problems),
    Hook("tightness_tables", register_tightness,
         "the tightness table of the plugin's results (tightness.json beside witnesses/, "
         "written by verify.tightness.write)",
         ("it is a JSON object of rows by result key",
          "each row is of a registered result, its default variant and registered status",
          "every result of the plugin that has an adapter has a row",
          "its numbers are current (a fresh verify.tightness.derive reproduces them)"),
         lambda: {str(t): t for t in tables()}, _tightness_problems),
    Hook("families", register_family,
         "a refutation family: scenarios along which the ratio measured/bound grows without limit",
         ("one per result, of a result registered as refuted", "it has members"),
         families, _family_problems),
    Hook("sweeps", register_sweep,
         "a rate sweep of a corollary's rate variable (fedbound rate KEY --over VAR)",
         ("one per result and variable", "its result has an adapter",
          "it sweeps a field of the adapter's scenario"),
         lambda: {sweep_name(k, over): s for k, by in declared().items() for over, s in by.items()},
         _sweep_problems),
    Hook("choosers", register_chooser,
         "a Chooser: certified, calibrated and simulated answers (fedbound choose NAME)",
         ("its name and aliases are registered once (refused otherwise)",
          "its key is a registered result"),
         choosers, _chooser_problems),
    Hook("experiments", register_experiment,
         "the runs behind a paper's experimental claims, with their footprint",
         ("its id is 'paper.name' and registered once (refused otherwise)", "a claim uses it"),
         lambda: {i: experiment(i) for i in experiment_ids()}, _experiment_problems),
    Hook("claims", register_claim,
         "one experimental claim of a paper, decided on paired differences (fedbound reproduce)",
         ("its experiment is registered first, of the same paper (refused otherwise)",
          "it cites the paper by its own numbering"),
         lambda: {c.id: c for c in claims()}, _claim_problems),
)


def hook(name: str) -> Hook:
    """The hook named ``name``."""
    for h in HOOKS:
        if h.name == name:
            return h
    raise ValueError(f"no hook {name!r}; hooks are {', '.join(h.name for h in HOOKS)}")


#: registrations that no plugin made (a script's, a test's): their "plugin"
OUTSIDE = ""


def registrations() -> dict[str, dict[str, list[str]]]:
    """What each loaded plugin registered: plugin module -> hook name -> names (every hook,
    in the order of :data:`HOOKS`), and :data:`OUTSIDE` for what no plugin registered (only
    when there is some)."""
    plugins = modules()
    out: dict[str, dict[str, list[str]]] = {p: {h.name: [] for h in HOOKS} for p in plugins}
    for h in HOOKS:
        for name in h.registered():
            mine = owner(h.origin(name), plugins)
            key = OUTSIDE if mine is None else mine
            out.setdefault(key, {x.name: [] for x in HOOKS})[h.name].append(name)
    return out


def problems(plugin: str | None = None) -> list[dict]:
    """The broken promises of the registrations of ``plugin`` (default: every plugin and
    what none registered): one dict per problem, with its plugin, hook, name and text."""
    regs = registrations()
    out = []
    for h in HOOKS:
        objects = h.registered()
        for p, by_hook in regs.items():
            if plugin is not None and p != plugin:
                continue
            for name in by_hook[h.name]:
                try:
                    found = h.problems(name, objects[name])
                except Exception as e:  # noqa: BLE001 - a broken registration is reported
                    found = [f"checking it raised {type(e).__name__}: {e}"]
                out += [{"plugin": p, "hook": h.name, "name": name, "problem": text}
                        for text in found]
    return out

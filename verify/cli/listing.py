"""``fedbound list``: every registered result, each variant with its status and tightness."""

from __future__ import annotations

from .common import Command, warn


def _tightness_cells(t: dict | None) -> tuple[str, str]:
    """The default slack and the tightest ratio of a tightness row, as text."""
    if t is None:
        return "-", "-"
    from ..text import ratio_text

    slack = t["default"]["slack"]
    best = "-" if t["tightest"] is None else ratio_text(t["tightest"]["ratio"])
    return (f"{ratio_text(slack)}x" if isinstance(slack, float) else str(slack),
            best + (" (unbounded)" if t["unbounded"] else ""))


def _rows() -> list[dict]:
    """``bounds.list()``, a result whose registration fails when it is read (a plugin's
    factory that raises on first use) left out with a warning: the others are listed."""
    from fedbound import bounds

    rows = []
    for key in bounds.keys():
        try:
            rows.append(bounds.registry.result_row(key))  # statuses; nothing built if registered
        except Exception as e:  # noqa: BLE001 - a broken plugin must not hide the others
            warn(f"result {key!r} cannot be listed: {type(e).__name__}: {e}")
    return rows


def run(args):
    from ..tightness import by_variant, row

    rows = _rows()
    for r in rows:
        t = row(r["key"])
        r["tightness"] = t
        r["default_slack"] = None if t is None else t["default"]["slack"]
        r["tightest_ratio"] = None if t is None or t["tightest"] is None else t["tightest"]["ratio"]
        r["variant_tightness"] = {v: {"default_slack": e["default"]["slack"],
                                      "tightest_ratio": e["tightest"]["ratio"]}
                                  for v, e in by_variant(t).items()}
    if args.json:
        return rows
    body = []
    for r in rows:
        entries = by_variant(r["tightness"])
        body += [(r["key"], v + ("*" if v == r["default"] else ""), r["statuses"][v],
                  *(_tightness_cells(entries[v]) if v in entries else ("", "")), r["title"])
                 for v in r["variants"]]
    head = ("key", "variant", "status", "slack", "tightest", "")
    widths = [max(len(x[i]) for x in body + [head]) for i in range(5)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths) + "  {}"
    print(fmt.format("key", "variant", "status", "slack", "tightest", "title"))
    print("\n".join(fmt.format(*row) for row in body))
    print("(* the default variant; slack: bound/measured on the default scenario; tightest: the "
          "largest ratio measured/bound known, from the stored witnesses)")
    return None


COMMANDS = (Command("list", run, "registered results: every variant with its status",
                    lambda p: None, "fedbound list --json",
                    exits={0: "the list was printed"}),)

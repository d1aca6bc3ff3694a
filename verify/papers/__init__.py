"""The four papers, each a plugin of fedbound built on the public extension API
(``verify.api``) and nothing else of ``verify``.

Each paper is a package (``mllsgd``, ``hfl``, ``tdcd``, ``afl``) loaded through the entry
point group ``fedbound.plugins``, as a third party's plugin is, and registering everything
it has through the hooks of ``verify.api.HOOKS``; importing this package registers nothing.
A paper's ``theorems`` module registers its results with ``bounds`` (one line each, naming
the function of ``bounds.<paper>`` that builds it); its ``adapters`` module holds, in a
fixed order, the statement and citation, the scenario dataclass, parameter derivation,
measurement (with its exact-expectation code, where the dynamics allow it) and one small
adapter class per result key; ``choose`` its chooser, where it has one; ``claims`` its
reproduced experiments; ``witnesses/`` its stored witnesses and ``tightness.json`` its
tightness table. ``docs/extending.md`` holds the template for a new paper or plugin.
"""

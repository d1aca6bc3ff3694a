"""fedbound_sgd: an example fedbound plugin, the nonconvex SGD bound of Ghadimi & Lan (2013).

Importing this package registers, through the hooks of ``verify.api.HOOKS`` as each of
fedbound's papers does, the result ``sgd.nonconvex`` (its theorem by path in
``theorems.py``, whose mathematics is ``theorem.py``), its adapter (``adapter.py``), its
chooser (``chooser.py``), its reproduced claim (``claims.py``), the folder of its stored
witnesses and its tightness table. fedbound imports it through the entry point declared in
``pyproject.toml`` (group ``fedbound.plugins``) once the package is installed, or when it is
named by ``FEDBOUND_PLUGINS=fedbound_sgd`` or ``fedbound --plugin fedbound_sgd``; the import
is light (sympy and torch are imported where they are used), as every command imports it.
"""

from importlib import resources

from fedbound.verify.api import register_tightness, register_witness_dir

from . import adapter, chooser, claims, theorems  # noqa: F401  (each registers what it holds)

register_witness_dir(resources.files(__name__) / "witnesses")
register_tightness(resources.files(__name__) / "tightness.json")

"""fedbound_sgd: an example fedbound plugin, the nonconvex SGD bound of Ghadimi & Lan (2013).

Importing this package registers the result ``sgd.nonconvex`` (its Theorem, in
``theorem.py``, and its adapter, in ``adapter.py``) and the directory of its stored
witnesses. fedbound imports it through the entry point declared in ``pyproject.toml``
(group ``fedbound.plugins``) once the package is installed, or when it is named by
``FEDBOUND_PLUGINS=fedbound_sgd`` or ``fedbound --plugin fedbound_sgd``.
"""

from importlib import resources

from fedbound.verify.api import register_witness_dir

from . import adapter, chooser, claims, theorem  # noqa: F401  (each registers what it holds)

register_witness_dir(resources.files(__name__) / "witnesses")

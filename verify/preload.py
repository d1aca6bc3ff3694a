"""What the fork server of the local pools imports before it forks a worker
(``verify.pool.PRELOAD``): the plugins, loaded as :func:`verify.plugins.load_plugins` loads
them, so that a plugin that fails to import is contained and left out. (The fork server
imports its preload list itself and survives only an ``ImportError``: a plugin that raised
anything else, or called ``sys.exit``, ended the server, and every pool of the driver with
it; one that calls ``os._exit`` is contained too, ``verify.exits.exit_guarded``.) Its
failures are the driver's to report, which loads the same plugins."""

from .exits import exit_guarded
from .plugins import load_plugins

with exit_guarded():
    load_plugins()

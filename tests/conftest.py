"""Hypothesis profiles. Under CI (the ``CI`` environment variable, which ``.ci/run`` sets)
the "ci" profile derandomizes hypothesis: every run draws the same examples, so a
submission's CI result does not depend on the luck of the draw. Local runs explore new
examples each time (and keep failures in .hypothesis/)."""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

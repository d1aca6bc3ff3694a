"""The result of this plugin, registered with ``bounds`` without building it: the one line
below names the function that builds each variant (``fedbound_sgd.theorem:theorem``, imported
with sympy on the first ``bounds.get``) and the status of every variant, so that importing the
plugin (which every ``fedbound`` command does) stays light and ``fedbound list`` answers
without sympy. This module is to the plugin what ``verify/papers/<paper>/theorems.py`` is to
each of fedbound's papers; ``theorem.py`` is its mathematics, as ``bounds/<paper>.py`` is theirs.
"""

from fedbound import bounds

KEY = "sgd.nonconvex"
TITLE = r"SGD on an $L$-smooth nonconvex $f$, constant step $\eta \le 1/L$"

bounds.register(KEY, TITLE, "fedbound_sgd.theorem:theorem", {"printed": "refuted", "proof": "holds"},
                "proof")

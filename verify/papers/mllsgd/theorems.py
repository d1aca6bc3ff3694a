"""The results of Castiglia et al. 2021 (Theorem 1, its limit (14), Corollary 1), registered
with ``bounds`` without building them: each row names the function of ``bounds.mllsgd`` (the
paper's mathematics) that builds a variant, and the status of every variant, so that
``fedbound list`` answers without sympy; ``tests/test_startup.py`` builds every variant and
checks its status against its row.
"""

from fedbound import bounds

bounds.register("mllsgd.theorem1", "MLL-SGD convergence bound (13)", "fedbound.bounds.mllsgd:theorem1",
                {"printed": "unverified", "proof": "holds-with-erratum", "tight": "holds-with-erratum"},
                "proof")
bounds.register("mllsgd.theorem1_limit", "MLL-SGD error floor (14)",
                "fedbound.bounds.mllsgd:theorem1_limit",
                {"printed": "unverified", "proof": "holds-with-erratum", "tight": "holds-with-erratum"},
                "proof")
bounds.register("mllsgd.corollary1", "MLL-SGD rate at eta = 1/(L sqrt K)",
                "fedbound.bounds.mllsgd:corollary1",
                {"proof": "holds-with-erratum", "tight": "holds-with-erratum"}, "proof")

"""The results of Das et al. 2022 (Theorem 1, Lemma 2, Remark 5), registered with ``bounds``
without building them: each row names the function of ``bounds.tdcd`` (the paper's
mathematics) that builds a variant, and the status of every variant, so that ``fedbound
list`` answers without sympy; ``tests/test_startup.py`` builds every variant and checks its
status against its row. The variant ``refined`` of Theorem 1 is fedbound's own (derived by
fedbound, not published).
"""

from fedbound import bounds

bounds.register("tdcd.theorem1", "TDCD convergence bound (15)", "fedbound.bounds.tdcd:theorem1",
                {"printed": "unverified", "proof": "holds-with-erratum", "tight": "holds-with-erratum",
                 "refined": "holds"}, "proof")
bounds.register("tdcd.lemma2", "TDCD drift of local gradients (30)", "fedbound.bounds.tdcd:lemma2",
                {"proof": "holds-with-erratum", "tight": "holds-with-erratum"}, "proof")
bounds.register("tdcd.remark5", "TDCD rate at eta = c/(Q sqrt R)", "fedbound.bounds.tdcd:remark5",
                {"proof": "holds-with-erratum"}, "proof")

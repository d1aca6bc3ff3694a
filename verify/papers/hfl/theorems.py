"""The results of Ali & Arafa 2025 (Lemma 1, Theorems 1 and 2, Corollary 1), registered with
``bounds`` without building them: each row names the function of ``bounds.hfl`` (the paper's
mathematics) that builds a variant, and the status of every variant, so that ``fedbound
list`` answers without sympy; ``tests/test_startup.py`` builds every variant and checks its
status against its row. The variants ``refined`` and ``iid`` are fedbound's own (derived by
fedbound, not published).
"""

from fedbound import bounds

bounds.register("hfl.lemma1", "HFL model deviation (18)", "fedbound.bounds.hfl:lemma1",
                {"printed": "holds", "proof": "holds"}, "proof")
bounds.register("hfl.theorem1", "HFL per-group bound (19)", "fedbound.bounds.hfl:theorem1",
                {"proof": "holds-with-erratum"}, "proof")
bounds.register("hfl.theorem2", "HFL global bound (20)", "fedbound.bounds.hfl:theorem2",
                {"printed": "holds-with-erratum", "arxiv": "holds-with-erratum",
                 "proof": "holds-with-erratum", "tight": "holds-with-erratum", "refined": "holds",
                 "iid": "holds"}, "proof")
bounds.register("hfl.corollary1", "HFL rate, Corollary 1", "fedbound.bounds.hfl:corollary1",
                {"printed": "holds-with-erratum", "proof": "holds-with-erratum", "refined": "holds",
                 "iid": "holds"}, "proof")

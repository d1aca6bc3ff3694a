"""The results of Yang et al. 2022 (Theorems 1 to 4, Corollaries 1 to 3), registered with
``bounds`` without building them: each row names the function of ``bounds.afl`` (the paper's
mathematics) that builds a variant, and the status of every variant, so that ``fedbound
list`` answers without sympy; ``tests/test_startup.py`` builds every variant and checks its
status against its row.
"""

from fedbound import bounds

bounds.register("afl.theorem1", "AFL lower bound Omega(sigma_G^2)", "fedbound.bounds.afl:theorem1",
                {"proof": "holds"}, "proof")
bounds.register("afl.theorem2", "AFA-CD, general arrivals", "fedbound.bounds.afl:theorem2",
                {"printed": "unverified", "proof": "holds-with-erratum"}, "proof")
bounds.register("afl.theorem3", "AFA-CD, uniform arrivals", "fedbound.bounds.afl:theorem3",
                {"printed": "refuted", "proof": "refuted"}, "proof")
bounds.register("afl.theorem4", "AFA-CS, bounded staleness", "fedbound.bounds.afl:theorem4",
                {"printed": "refuted", "proof": "refuted"}, "proof")
bounds.register("afl.corollary1", "AFA-CD rate, general arrivals", "fedbound.bounds.afl:corollary1",
                {"printed": "unverified", "proof": "holds-with-erratum"}, "proof")
bounds.register("afl.corollary2", "AFA-CD rate, uniform arrivals", "fedbound.bounds.afl:corollary2",
                {"printed": "rate-refuted", "proof": "rate-refuted"}, "proof")
bounds.register("afl.corollary3", "AFA-CS rate", "fedbound.bounds.afl:corollary3",
                {"printed": "rate-refuted", "proof": "rate-refuted"}, "proof")

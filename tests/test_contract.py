"""fedbound's contract checks (verify.testing) on every built-in result, through the same
``parametrize_with_checks`` a user runs on their own results. A refuted result's checks
on random scenarios are expected failures (non-strict xfail) with the result's notes."""

from fedbound import bounds
from fedbound.verify.testing import parametrize_with_checks


@parametrize_with_checks(bounds.keys())
def test_builtin_results_pass_the_contract(fedbound_case):
    fedbound_case()

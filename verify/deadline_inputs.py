"""The certified constants that fedbound's deadline bounds add to a chooser (derived by
fedbound, not published; bounds/derivations/hfl_deadline.md, mllsgd_deadline.md,
tdcd_deadline.md), declared once for every chooser that gives their certified answers.

``mu``: the PL constant, the smallest eigenvalue of a quadratic (``hfl.deadline_quadratic``
and ``mllsgd.deadline_quadratic`` bound the worst case over the quadratics with spectrum in
[mu, L]; ``hfl.deadline_pl`` and ``tdcd.deadline_pl`` hold for a mu-PL objective). Given, the
chooser's certified answers include the deadline bounds', each a guarantee on the expected
loss at the deadline, the metric the simulation ranks by. ``zeta``: the clients'
heterogeneity, ||grad f_i - grad f||^2 <= zeta^2 (``hfl.deadline_pl``; 0 when the clients'
data are i.i.d., the paper's Section II).
"""

from __future__ import annotations

from .declare import Input
from .scenario import FieldError

MU = Input("mu", float, "PL constant mu (a quadratic's smallest eigenvalue), a certified constant "
           "you vouch for, at most L: given, the certified answers include fedbound's deadline "
           "bounds, each a guarantee on the expected loss at the deadline", low=0, low_open=True)
ZETA = Input("zeta", float, "heterogeneity of the clients' gradients, ||grad f_i - grad f||^2 <= "
             "zeta^2, a certified constant for the deadline_pl variant (default: 0 where the "
             "clients are i.i.d. on one problem, none where they hold their own data)", low=0)
#: what a deadline variant's certified answer is, for its note
GUARANTEE = "a guarantee on the expected loss at the deadline"


def require_mu(mu: float | None, L: float | None, named: str) -> float | None:
    """``mu`` (already checked by :data:`MU`: finite, > 0), refused where it exceeds the
    certified smoothness ``L`` (the spectrum [mu, L] would be empty): FieldError naming it as
    ``named`` (``--mu``), the value and the rule."""
    if mu is not None and L is not None and mu > L:
        raise FieldError(f"{named}={mu:g} must be at most L = {L:g}, the certified smoothness "
                         "(mu <= L: the spectrum [mu, L])")
    return mu


class DeadlineVariants:
    """A mix-in for a ``verify.choose.Chooser`` (listed before it) whose certified answers
    include fedbound's deadline bounds when the PL constant is given: ``deadline`` maps the
    name of each such answer to its registered result; the chooser sets ``mu`` (None: not
    given)."""

    deadline: dict[str, str] = {}
    mu: float | None = None

    def variants(self) -> list[str]:
        """The chooser's valid variants, and with ``mu`` the deadline bounds' (``deadline``)."""
        return [*super().variants(), *(self.deadline if self.mu is not None else ())]

    def result(self, variant: str):
        """The deadline bound of a deadline answer, else the chooser's own."""
        from fedbound import bounds

        if variant in self.deadline:
            return bounds.get(self.deadline[variant])
        return super().result(variant)

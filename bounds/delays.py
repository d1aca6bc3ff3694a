"""Delay models of delay-sensitive hierarchical FL (Ali & Arafa 2025, key ``hfl`` of
:mod:`bounds.references`; equation numbers are the paper's).

A delay law gives the wall-clock time ``tau`` of one local iteration of a group (LPS
broadcast + SGD + local aggregation, Section II) or of one global aggregation (Section II,
before (13)). The paper's law is the shifted exponential ``tau = c + Exp(rate lambda)``
(Section IV), with shift and mean linear in the group sizes (Section IV)::

    c_i = d |N_i| + b,      1/lambda_i = e |N_i| + f,       (local, per group)
    c_g = d_g |N_g| + b_g,  1/lambda_g = e_g |N_g| + f_g,   (global, |N_g| groups)

given in the paper's order {d, b, e, f, d_g, b_g, e_g, f_g}; here they are named
``d_shift, b_shift, d_mean, b_mean, dg_shift, bg_shift, dg_mean, bg_mean`` so that the
paper's ``e`` and ``f`` do not clash with Euler's number and the loss.

From a :class:`DelayModel` and (S, T) follow the local-iteration counts t_i^u of (7)
and the number of rounds U of (13): their exact distribution (shifted exponential),
the a.s. envelopes t_i^max = max(1, ceil(S / c_i)) of (22), and
U <= ceil(T / (max(S, max_i c_i) + c_g)), the renewal approximation of E U, and a
vectorised sampler of whole schedules t[u, i].

Shifts are exact rationals (:class:`fractions.Fraction` of the decimal text of the
number), so that c_i = 0.09 * 10 + 0.1 is exactly 1 and t^max = 5 at S = 5, not 6.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from scipy import special

from .references import cite

PAPER = cite("hfl")
#: names of the 8 linear-model parameters, in the paper's order {d, b, e, f, d_g, b_g, e_g, f_g}
LINEAR_PARAMETERS = ("d_shift", "b_shift", "d_mean", "b_mean",
                     "dg_shift", "bg_shift", "dg_mean", "bg_mean")
#: P(t > n) below this is treated as 0 when a count has no a.s. maximum (zero shift)
TAIL_CUTOFF = 1e-16


def rational(name: str, value) -> Fraction:
    """``value`` as an exact rational: ints and Fractions as they are, floats through their
    shortest decimal ``repr`` (0.1 -> 1/10), strings parsed as decimals. Raises ValueError
    naming ``name`` for anything else or a non-finite number."""
    if isinstance(value, bool):
        raise ValueError(f"{name}={value!r} is not a number")
    if isinstance(value, (int, Fraction, np.integer)):
        return Fraction(int(value)) if isinstance(value, np.integer) else Fraction(value)
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(value):
            raise ValueError(f"{name}={value!r} must be finite")
        return Fraction(repr(float(value)))
    if isinstance(value, str):
        try:
            return Fraction(value.strip())
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"{name}={value!r} is not a decimal number") from None
    raise ValueError(f"{name}={value!r} is not a number")


def _nonnegative(name: str, value) -> Fraction:
    x = rational(name, value)
    if x < 0:
        raise ValueError(f"{name}={float(x):g} must be >= 0 (a delay cannot be negative)")
    return x


# ---------------------------------------------------------------------- delay laws


@dataclass(frozen=True)
class ShiftedExponential:
    """tau = shift + Exp with mean ``mean`` (rate 1/mean), the law of Section IV.

    ``mean = 0`` is the deterministic delay ``tau = shift``; ``shift = 0`` the plain
    exponential. ``shift`` is the a.s. minimum c of (21)."""

    shift: Fraction
    mean: Fraction

    def __post_init__(self):
        object.__setattr__(self, "shift", _nonnegative("shift", self.shift))
        object.__setattr__(self, "mean", _nonnegative("mean", self.mean))
        if self.shift == 0 and self.mean == 0:
            raise ValueError("shift=0 and mean=0: a delay law must have a positive mean")

    closed_form = True

    @property
    def expectation(self) -> float:
        """E tau = c + 1/lambda."""
        return float(self.shift + self.mean)

    @property
    def second_moment(self) -> float:
        """E tau^2 = (c + 1/lambda)^2 + 1/lambda^2."""
        return float((self.shift + self.mean) ** 2 + self.mean**2)

    def sample(self, rng: np.random.Generator, shape) -> np.ndarray:
        """Draws of tau, one ``rng.exponential`` call (float64)."""
        draws = rng.exponential(1.0, shape)
        return float(self.shift) + float(self.mean) * draws

    def partial_sum_below(self, S: Fraction, n: np.ndarray) -> np.ndarray:
        """P(tau_1 + ... + tau_n < S) for integers n >= 0: the Poisson tail
        P(Poisson((S - n c)/mean) >= n) when n c < S, else 0 (derived by fedbound: the
        exponential parts of n draws sum to a Gamma(n) variable)."""
        n = np.asarray(n, dtype=np.int64)
        slack = np.array([float(S - int(k) * self.shift) for k in n.ravel()]).reshape(n.shape)
        inside = slack > 0
        if self.mean == 0:
            return inside.astype(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            # P(Poisson(m) >= n) = P(Poisson(m) > n - 1): scipy.special.pdtrc, the function
            # behind scipy.stats.poisson.sf (same numbers, without importing scipy.stats)
            tail = special.pdtrc(np.maximum(n - 1, 0), np.where(inside, slack, 0.0) / float(self.mean))
        return np.where(n == 0, 1.0, np.where(inside, tail, 0.0))


@dataclass(frozen=True)
class LogNormal:
    """tau = shift + exp(mu + s Z), Z standard normal: a heavier-tailed law through the same
    interface. No closed form for the count distribution: its moments are Monte Carlo."""

    shift: Fraction
    mu: float
    s: float

    def __post_init__(self):
        object.__setattr__(self, "shift", _nonnegative("shift", self.shift))
        for name in ("mu", "s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{name}={v!r} must be a finite number")
        if self.s < 0:
            raise ValueError(f"s={self.s} must be >= 0")

    closed_form = False

    @property
    def expectation(self) -> float:
        return float(self.shift) + math.exp(self.mu + self.s**2 / 2)

    @property
    def second_moment(self) -> float:
        c, m = float(self.shift), math.exp(self.mu + self.s**2 / 2)
        return c * c + 2 * c * m + math.exp(2 * self.mu + 2 * self.s**2)

    def sample(self, rng: np.random.Generator, shape) -> np.ndarray:
        return float(self.shift) + np.exp(self.mu + self.s * rng.standard_normal(shape))


def deterministic(c) -> ShiftedExponential:
    """tau = c a.s."""
    return ShiftedExponential(c, 0)


def exponential(mean) -> ShiftedExponential:
    """tau ~ Exp with the given mean (no shift: t has no a.s. maximum for S > 0)."""
    return ShiftedExponential(0, mean)


DelayLaw = ShiftedExponential | LogNormal


@dataclass(frozen=True)
class DelayModel:
    """One delay law per group (local iterations) and one for the global server."""

    local: tuple[DelayLaw, ...]
    global_: DelayLaw

    def __post_init__(self):
        if len(self.local) == 0:
            raise ValueError("local: a delay model needs at least one group")
        object.__setattr__(self, "local", tuple(self.local))

    @property
    def groups(self) -> int:
        return len(self.local)

    @classmethod
    def linear(cls, params: Sequence, sizes: Sequence[int]) -> DelayModel:
        """The paper's linear-in-size shifted-exponential model from its 8 parameters in the
        order {d, b, e, f, d_g, b_g, e_g, f_g} (Section IV) and the group sizes |N_i|."""
        params = list(params)
        if len(params) != 8:
            raise ValueError(f"delays has {len(params)} entries; need the 8 parameters "
                             f"{{d, b, e, f, d_g, b_g, e_g, f_g}} ({', '.join(LINEAR_PARAMETERS)})")
        d, b, e, f, dg, bg, eg, fg = (_nonnegative(f"delays[{i}] ({n})", v) for i, (n, v) in
                                      enumerate(zip(LINEAR_PARAMETERS, params, strict=True)))
        sizes = validate_sizes(sizes)
        G = len(sizes)
        if d * min(sizes) + b == 0 and e * min(sizes) + f == 0:
            raise ValueError(f"delays[0..3] (d, b, e, f) = {float(d):g}, {float(b):g}, {float(e):g}, "
                             f"{float(f):g}: a group's local delay d |N_i| + b + Exp(mean e |N_i| "
                             "+ f) would be 0; a delay law needs a positive mean")
        if dg * G + bg == 0 and eg * G + fg == 0:
            raise ValueError(f"delays[4..7] (d_g, b_g, e_g, f_g) = {float(dg):g}, {float(bg):g}, "
                             f"{float(eg):g}, {float(fg):g}: the global delay d_g |N_g| + b_g + "
                             "Exp(mean e_g |N_g| + f_g) would be 0; a delay law needs a positive mean")
        local = tuple(ShiftedExponential(d * n + b, e * n + f) for n in sizes)
        return cls(local, ShiftedExponential(dg * G + bg, eg * G + fg))


def validate_sizes(sizes) -> tuple[int, ...]:
    """Group sizes |N_i| as a tuple of ints >= 1, or ValueError naming the bad entry."""
    arr = np.asarray(sizes)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError(f"sizes={sizes!r} must be a non-empty list of group sizes")
    out = []
    for i, n in enumerate(arr.tolist()):
        if isinstance(n, bool) or not isinstance(n, (int, float)) or n != int(n) or n < 1:
            raise ValueError(f"sizes[{i}]={n!r} must be an integer >= 1 (a group cannot be empty)")
        out.append(int(n))
    return tuple(out)


def _sync_time(S) -> Fraction:
    S = rational("S", S)
    if S < 0:
        raise ValueError(f"S={float(S):g} must be >= 0 (the sync time of {PAPER}, eq. (7))")
    return S


def _system_time(T) -> Fraction:
    T = rational("T", T)
    if T <= 0:
        raise ValueError(f"T={float(T):g} must be > 0 (the system time of {PAPER}, eq. (13))")
    return T


# ---------------------------------------------------------------------- counts t_i


def count_max(law: DelayLaw, S) -> int:
    """t^max = max(1, ceil(S / c)), (22), in exact rational arithmetic
    (the max with 1 covers S = 0, where (7) gives t = 1). ValueError if c = 0 < S
    (no a.s. maximum)."""
    S = _sync_time(S)
    if S == 0:
        return 1
    if law.shift == 0:
        raise ValueError(f"shift c=0 with S={float(S):g} > 0: t has no a.s. maximum "
                         f"({PAPER}, eq. (22) needs (21): tau >= c > 0)")
    return max(1, math.ceil(S / law.shift))


def count_support(law: DelayLaw, S) -> int:
    """Largest n with P(t > n - 1) non-negligible: t^max, or for a zero shift the point
    where the tail drops below ``TAIL_CUTOFF``."""
    S = _sync_time(S)
    if S == 0 or law.shift > 0:
        return count_max(law, S)
    n = max(8, int(4 * float(S) / law.expectation) + 8)
    while law.partial_sum_below(S, np.array([n]))[0] > TAIL_CUTOFF:
        n *= 2
    return n


def count_tail(law: ShiftedExponential, S, n) -> np.ndarray:
    """P(t > n) = P(tau_1 + ... + tau_n < S) for t of (7) (n >= 1 in the min, so
    P(t > 0) = 1 and S = 0 gives t = 1); exact through the Poisson tail."""
    S = _sync_time(S)
    _require_closed_form(law)
    n = np.asarray(n)
    if (n < 0).any():
        raise ValueError("n must be >= 0")
    return np.where(n == 0, 1.0, law.partial_sum_below(S, n))


def count_pmf(law: ShiftedExponential, S) -> np.ndarray:
    """P(t = n) for n = 1..support, (7), exact (shifted exponential)."""
    n = np.arange(count_support(law, S) + 1)
    tail = count_tail(law, S, n)
    return tail[:-1] - tail[1:]


def count_moments(law: DelayLaw, S, *, draws: int = 200_000, seed: int = 0) -> tuple[float, float]:
    """(E t, E t^2) of (7): exact sums E t = sum_{n>=0} P(t > n),
    E t^2 = sum_{n>=0} (2n+1) P(t > n) for the shifted exponential;
    Monte Carlo with ``draws`` samples from ``seed`` for a law without a closed form."""
    S = _sync_time(S)
    if not law.closed_form:
        t = sample_counts(law, S, draws, np.random.default_rng(seed))
        return float(t.mean()), float((t.astype(float) ** 2).mean())
    n = np.arange(count_support(law, S))
    tail = count_tail(law, S, n)
    return float(tail.sum()), float(((2 * n + 1) * tail).sum())


def count_mean_inverse(law: DelayLaw, S, *, draws: int = 200_000, seed: int = 0) -> float:
    """E[1/t] of the count t of (7) (Ali & Arafa 2025, Section II): the sum
    sum_{n>=1} P(t = n) / n over the exact count distribution of the shifted exponential;
    Monte Carlo with ``draws`` samples from ``seed`` for a law without a closed form.
    Not 1 / E[t]: by Jensen E[1/t] >= 1 / E[t]. It is the per-round factor of the variance
    of a group's averaged local gradients (fedbound's refined Theorem 2,
    bounds/derivations/hfl_refined.md)."""
    S = _sync_time(S)
    if not law.closed_form:
        t = sample_counts(law, S, draws, np.random.default_rng(seed))
        return float((1.0 / t).mean())
    pmf = count_pmf(law, S)
    return float((pmf / np.arange(1, pmf.size + 1)).sum())


def renewal_count(law: DelayLaw, S) -> float:
    """Renewal approximation E t ~ S/mu + E tau^2 / (2 mu^2), mu = E tau (renewal
    theory; large S). An approximation, not a bound."""
    S = float(_sync_time(S))
    mu = law.expectation
    return S / mu + law.second_moment / (2 * mu * mu)


def _require_closed_form(law: DelayLaw) -> None:
    if not law.closed_form:
        raise ValueError(f"{type(law).__name__} has no closed-form count distribution; "
                         "use count_moments (Monte Carlo) or sample_counts")


# ---------------------------------------------------------------------- sampling


def _first_crossing(law: DelayLaw, S: float, shape: tuple[int, ...], rng: np.random.Generator,
                    width: int) -> tuple[np.ndarray, np.ndarray]:
    """t = min{n >= 1: tau_1 + ... + tau_n >= S} (7) and the local time Y = sum_{l<=t}
    tau_l, for independent draws of shape ``shape``. Draws ``width`` iterations at a time
    (more only where no crossing happened yet, for laws without a.s. maximum)."""
    t = np.zeros(shape, dtype=np.int64)
    Y = np.zeros(shape)
    done = np.zeros(shape, dtype=bool)
    offset, base = 0, np.zeros(shape)
    while not done.all():
        tau = law.sample(rng, (*shape, width))
        csum = base[..., None] + np.cumsum(tau, axis=-1)
        crossed = csum >= S
        first = np.argmax(crossed, axis=-1)
        hit = crossed.any(axis=-1) & ~done
        t = np.where(hit, offset + first + 1, t)
        Y = np.where(hit, np.take_along_axis(csum, first[..., None], axis=-1)[..., 0], Y)
        done |= hit
        base, offset = csum[..., -1], offset + width
    return t, Y


def _width(law: DelayLaw, S: float) -> int:
    if S == 0:
        return 1
    if law.shift > 0:
        return count_max(law, S)
    return max(1, int(2 * S / law.expectation) + 4)


def sample_counts(law: DelayLaw, S, size: int, rng: np.random.Generator) -> np.ndarray:
    """``size`` independent draws of t of (7)."""
    S = float(_sync_time(S))
    return _first_crossing(law, S, (size,), rng, _width(law, S))[0]


@dataclass(frozen=True)
class Schedules:
    """Sampled delay paths, zero-padded to the longest: ``t`` [R, U_max, G] local-iteration
    counts (0 after the last round), ``U`` [R] rounds of (13), ``local_time`` [R, U_max, G]
    sum_{l <= t_i^u} tau^u_{i,l}, ``global_delay`` [R, U_max] tau_g^u and ``duration``
    [R, U_max] D_u = max_i local_time + tau_g (9), all zero after round U."""

    t: np.ndarray
    U: np.ndarray
    local_time: np.ndarray
    global_delay: np.ndarray
    duration: np.ndarray

    @property
    def end_time(self) -> np.ndarray:
        """Wall-clock time at the end of each round, accumulated (not the '=' of line 21 of
        Algorithm 1);
        constant after round U."""
        return np.cumsum(self.duration, axis=-1)

    def path(self, r: int) -> np.ndarray:
        """The schedule t [U_r, G] of path r (no padding)."""
        return self.t[r, : int(self.U[r])]


def sync_times(S, rounds: int, ramp: bool) -> list[Fraction]:
    """S_u for u = 1..rounds: S for all u, or the increasing schedule S_u = min(u, S) of
    Fig. 13 (Section IV-D) when ``ramp``."""
    S = _sync_time(S)
    return [min(Fraction(u), S) if ramp else S for u in range(1, rounds + 1)]


def sample_rounds(model: DelayModel, S, rounds: int, paths: int, rng: np.random.Generator, *,
                  first_round: int = 1, ramp: bool = False) -> tuple[np.ndarray, ...]:
    """``rounds`` consecutive rounds for ``paths`` paths: t [R, rounds, G], local time
    [R, rounds, G], tau_g [R, rounds]. Groups draw independently (Section II)."""
    G = model.groups
    S_u = sync_times(S, first_round + rounds - 1, ramp)[first_round - 1:]
    t = np.zeros((paths, rounds, G), dtype=np.int64)
    Y = np.zeros((paths, rounds, G))
    levels = sorted(set(S_u))
    for level in levels:
        cols = [j for j, s in enumerate(S_u) if s == level]
        for i, law in enumerate(model.local):
            ti, Yi = _first_crossing(law, float(level), (paths, len(cols)), rng,
                                     _width(law, float(level)))
            t[:, cols, i], Y[:, cols, i] = ti, Yi
    tau_g = model.global_.sample(rng, (paths, rounds))
    return t, Y, tau_g


def rounds_envelope(model: DelayModel, S, T) -> int:
    """U <= ceil(T / (max(S, max_i c_i) + c_g)) a.s., since D_u >= max(S, max c_i) + c_g by
    (7), (9) and (21).
    ValueError when that denominator is 0 (no a.s. bound)."""
    S, T = _sync_time(S), _system_time(T)
    floor = max(S, max(law.shift for law in model.local)) + model.global_.shift
    if floor == 0:
        raise ValueError("S=0 with zero shifts everywhere: U has no a.s. upper bound")
    return math.ceil(T / floor)


def sample_schedules(model: DelayModel, S, T, paths: int, rng: np.random.Generator, *,
                     ramp: bool = False) -> Schedules:
    """``paths`` independent delay paths of Algorithm 1: per round the counts t of
    (7), the round duration D_u = max_i sum_{l<=t_i} tau + tau_g (9), accumulated
    into the system time, and U = min{m: sum_{u<=m} D_u >= T} of (13) (the round that
    crosses T is counted). ``ramp`` uses S_u = min(u, S) (Fig. 13)."""
    S, T = _sync_time(S), _system_time(T)
    if isinstance(paths, bool) or int(paths) != paths or paths < 1:
        raise ValueError(f"paths={paths!r} must be an integer >= 1")
    try:
        block = rounds_envelope(model, S, T)
    except ValueError:
        block = 16
    parts = []
    elapsed = np.zeros(paths)
    start = 1
    while True:
        t, Y, tau_g = sample_rounds(model, S, block, paths, rng, first_round=start, ramp=ramp)
        parts.append((t, Y, tau_g))
        elapsed = elapsed + (Y.max(axis=-1) + tau_g).sum(axis=-1)
        start += block
        if (elapsed >= float(T)).all():
            break
    t, Y, tau_g = (np.concatenate(p, axis=1) for p in zip(*parts, strict=True))
    D = Y.max(axis=-1) + tau_g
    ends = np.cumsum(D, axis=1)
    U = np.argmax(ends >= float(T), axis=1) + 1
    keep = np.arange(t.shape[1])[None, :] < U[:, None]
    u_max = int(U.max())
    t = np.where(keep[..., None], t, 0)[:, :u_max]
    Y = np.where(keep[..., None], Y, 0.0)[:, :u_max]
    tau_g = np.where(keep, tau_g, 0.0)[:, :u_max]
    return Schedules(t=t, U=U, local_time=Y, global_delay=tau_g,
                     duration=np.where(keep, D, 0.0)[:, :u_max])


# ---------------------------------------------------------------------- rounds U


@dataclass(frozen=True)
class RoundStatistics:
    """Schedule statistics for a fixed S: per-group (E t, E t^2, E 1/t, t^max), the round-duration
    moments E D, E D^2 (Monte Carlo), and E U by the renewal approximation
    T/E D + E D^2 / (2 (E D)^2) (renewal theory; an approximation) with its a.s. envelope."""

    mean_t: np.ndarray
    mean_t2: np.ndarray
    mean_inv_t: np.ndarray
    t_max: np.ndarray
    mean_D: float
    mean_D2: float
    mean_U: float
    U_envelope: float


def round_duration_moments(model: DelayModel, S, *, draws: int = 4000,
                           seed: int = 0) -> tuple[float, float]:
    """(E D, E D^2) of one round D = max_i Y_i + tau_g (9), Monte Carlo with ``draws``
    rounds from ``seed`` (E max_i Y_i has no simple closed form)."""
    _, Y, tau_g = sample_rounds(model, S, 1, draws, np.random.default_rng(seed))
    D = Y[:, 0].max(axis=-1) + tau_g[:, 0]
    return float(D.mean()), float((D * D).mean())


def round_statistics(model: DelayModel, S, T, *, draws: int = 4000, seed: int = 0
                     ) -> RoundStatistics:
    """:class:`RoundStatistics` at sync time S and system time T."""
    T_ = float(_system_time(T))
    moments = [count_moments(law, S) for law in model.local]
    t_max = []
    for law in model.local:
        try:
            t_max.append(count_max(law, S))
        except ValueError:
            t_max.append(math.inf)
    ED, ED2 = round_duration_moments(model, S, draws=draws, seed=seed)
    try:
        env = float(rounds_envelope(model, S, T))
    except ValueError:
        env = math.inf
    mean_U = min(T_ / ED + ED2 / (2 * ED * ED), env)
    return RoundStatistics(
        mean_t=np.array([m[0] for m in moments]), mean_t2=np.array([m[1] for m in moments]),
        mean_inv_t=np.array([count_mean_inverse(law, S) for law in model.local]),
        t_max=np.array(t_max, dtype=float), mean_D=ED, mean_D2=ED2, mean_U=max(mean_U, 1.0),
        U_envelope=env)

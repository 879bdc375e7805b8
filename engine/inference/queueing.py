"""The p95 tail of TTFT and TPOT from the queueing of requests at a given load.

The roofline gives one steady-state value per option (the typical request). Requests arrive at
random, so some wait for a batch slot and some share their decode with more prefills than the
average. Two documented approximations, vectorised (docs/inference.md, "Latency tails"):

- TTFT: each replica has `batch` slots, each holding one request for S = output tokens × TPOT.
  With Poisson arrivals at λ requests/s over c = replicas × batch slots (utilization
  ρ = λS/c), the chance to wait is Sakasegawa's (1977) M/M/c approximation
  P(wait) ≈ ρ^(√(2(c+1)) − 1), and the wait given a wait is exponential with mean
  1/(c/S − λ) (Erlang C), halved for deterministic service by the Allen–Cunneen factor
  (Ca² + Cs²)/2 = 1/2. p95 wait = max(0, ln(P(wait)/0.05)) / (2 (c/S − λ)).
- TPOT (a request's mean time per output token, as serving benchmarks report it): over its
  decode about `batch` other requests join the replica (each prefill pauses every sequence),
  a Poisson count; its p95 comes from the Cornish–Fisher expansion (z = 1.645).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import ArrayLike, NDArray

PERCENTILE = 0.95
TAIL_SHARE = 1.0 - PERCENTILE
Z_95 = 1.6448536269514722  # standard normal quantile at 0.95
DETERMINISTIC_SERVICE_FACTOR = 0.5  # Allen–Cunneen (Ca² + Cs²)/2 with Ca² = 1, Cs² = 0
BISECTION_STEPS = 64  # halvings of an integer range up to 2^53: always enough
# Whether each candidate count fits (monotone in the count), element-wise.
Fits = Callable[[NDArray[np.float64]], NDArray[np.bool_]]


def _f(value: ArrayLike) -> NDArray[np.float64]:
    return np.asarray(value, dtype=np.float64)


def poisson_p95(mean: ArrayLike) -> NDArray[np.float64]:
    """The 95th percentile of a Poisson count (0 for a zero mean): the Cornish–Fisher
    expansion with a continuity correction, ⌈m + z·√m + (z² − 1)/6 − 1/2⌉."""
    m = np.maximum(_f(mean), 0.0)
    quantile = m + Z_95 * np.sqrt(m) + (Z_95**2 - 1.0) / 6.0 - 0.5
    return np.where(m > 0, np.ceil(quantile), 0.0)


def tpot_p95_seconds(
    batch: ArrayLike, step_s: ArrayLike, prefill_s: ArrayLike, output_tokens: ArrayLike
) -> NDArray[np.float64]:
    """A request's time per output token at the 95th percentile of prefills during its decode."""
    return _f(step_s) + poisson_p95(batch) * _f(prefill_s) / _f(output_tokens)


def wait_probability(servers: ArrayLike, utilization: ArrayLike) -> NDArray[np.float64]:
    """Sakasegawa's approximation of the M/M/c chance to wait (1 when ρ >= 1)."""
    rho, c = _f(utilization), _f(servers)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = np.power(np.clip(rho, 0.0, 1.0), np.sqrt(2.0 * (c + 1.0)) - 1.0)
    return np.where(rho >= 1.0, 1.0, np.where(c >= 1, p, 1.0))


def wait_p95_seconds(
    servers: ArrayLike, service_s: ArrayLike, arrivals_per_s: ArrayLike
) -> NDArray[np.float64]:
    """The 95th-percentile wait for a slot (inf when the queue does not settle, ρ >= 1)."""
    c, s, lam = _f(servers), _f(service_s), _f(arrivals_per_s)
    with np.errstate(invalid="ignore", divide="ignore"):
        rho = lam * s / c
        spare_per_s = c / s - lam
        p_wait = wait_probability(c, rho)
        tail = np.log(np.maximum(p_wait, TAIL_SHARE) / TAIL_SHARE)
        wait = tail * DETERMINISTIC_SERVICE_FACTOR / spare_per_s
    # A queue at capacity (ρ = 1 up to rounding) never settles.
    settled = rho < 1.0 - 1e-9
    return np.where(settled & (c >= 1), np.maximum(wait, 0.0), np.inf)


def smallest_integer(fits: Fits, low: ArrayLike, high: ArrayLike) -> NDArray[np.float64]:
    """Per element, the smallest n in [low, high] with fits(n) (fits monotone: false → true);
    high + 1 when none fits."""
    lo, hi = _f(low).copy(), _f(high) + 1.0
    for _ in range(BISECTION_STEPS):
        open_ = lo < hi
        if not open_.any():
            break
        mid = np.floor((lo + hi) / 2.0)
        ok = fits(mid)
        hi = np.where(open_ & ok, mid, hi)
        lo = np.where(open_ & ~ok, mid + 1.0, lo)
    return lo


def largest_integer(fits: Fits, low: ArrayLike, high: ArrayLike) -> NDArray[np.float64]:
    """Per element, the largest n in [low, high] with fits(n) (fits monotone: true → false);
    low when none above it fits."""
    flipped = smallest_integer(lambda n: ~fits(n), _f(low) + 1.0, _f(high))
    return flipped - 1.0

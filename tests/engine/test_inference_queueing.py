"""The p95 latency tails of the serving model (engine.inference.queueing).

Published formulas checked here, computed exactly in the test:
- the Poisson distribution's 95th percentile (summing its probabilities);
- Erlang's C formula for the chance to wait in an M/M/c queue (A. K. Erlang 1917, via the
  Erlang B recursion), against Sakasegawa's approximation (H. Sakasegawa 1977, "An
  approximation formula L_q ≈ α·ρ^β/(1−ρ)", Annals of the Institute of Statistical
  Mathematics 29: 67–75);
- the Pollaczek–Khinchine mean wait of an M/D/1 queue, ρ·S / (2(1 − ρ)).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.inference import InferenceWorkload, evaluate_inference, queueing, roofline
from engine.inference.sizing import terms_from_columns
from tests.support.inference_inputs import H100_SXM, LLAMA3_70B, LLAMA3_70B_PARAMS


def exact_poisson_p95(mean: float) -> int:
    k, term = 0, math.exp(-mean)
    total = term
    while total < 0.95 - 1e-12:
        k += 1
        term *= mean / k
        total += term
    return k


def exact_erlang_c(servers: int, offered: float) -> float:
    blocking = 1.0
    for k in range(1, servers + 1):
        blocking = offered * blocking / (k + offered * blocking)
    rho = offered / servers
    return blocking / (1.0 - rho * (1.0 - blocking))


def test_poisson_p95_is_the_exact_quantile_or_one_above():
    means = np.arange(1, 400)
    approx = queueing.poisson_p95(means)
    exact = np.array([exact_poisson_p95(m) for m in means])
    assert ((approx - exact >= 0) & (approx - exact <= 1)).all()
    assert (approx == exact).mean() > 0.99


@pytest.mark.parametrize("servers", [1, 2, 5, 10, 50, 200, 1000])
def test_chance_to_wait_against_erlang_c(servers):
    rho = np.linspace(0.3, 0.999, 120)
    approx = queueing.wait_probability(servers, rho)
    exact = np.array([exact_erlang_c(servers, r * servers) for r in rho])
    if servers == 1:  # M/M/1: the chance to wait is ρ exactly
        np.testing.assert_allclose(approx, rho, rtol=1e-12)
    # Where the p95 wait can be positive (chance >= 5 %), never more than 3 % too low and at
    # most twice too high: the tail is stated conservatively.
    mattering = exact >= queueing.TAIL_SHARE
    ratio = approx[mattering] / exact[mattering]
    assert mattering.any() and ratio.min() > 0.97 and ratio.max() < 2.0


def test_one_slot_tail_has_the_pollaczek_khinchine_mean():
    service_s, rho = 2.0, np.array([0.2, 0.5, 0.8, 0.95])
    mean_wait = rho * service_s / (2 * (1 - rho))  # M/D/1, Pollaczek–Khinchine
    # P(W > t) = ρ·exp(−t·ρ/mean_wait): its 95th percentile.
    expected = np.log(rho / 0.05) * mean_wait / rho
    got = queueing.wait_p95_seconds(1, service_s, rho / service_s)
    np.testing.assert_allclose(got, np.maximum(expected, 0.0), rtol=1e-12)


def test_full_load_never_settles_and_spare_slots_do_not_wait():
    assert np.isinf(queueing.wait_p95_seconds(10, 1.0, 10.0))
    assert np.isinf(queueing.wait_p95_seconds(0, 1.0, 1.0))
    assert queueing.wait_p95_seconds(1000, 1.0, 100.0) == 0.0


@given(
    servers=st.integers(1, 5000),
    load=st.floats(0.01, 0.999),
    more=st.integers(1, 100),
    busier=st.floats(1.0, 1.5),
)
def test_more_slots_never_wait_longer_and_more_load_never_waits_less(servers, load, more, busier):
    arrivals = load * servers  # service of one second
    base = queueing.wait_p95_seconds(servers, 1.0, arrivals)
    assert queueing.wait_p95_seconds(servers + more, 1.0, arrivals) <= base
    assert queueing.wait_p95_seconds(servers, 1.0, arrivals * busier) >= base


def test_integer_searches_find_the_boundary():
    high = np.array([10.0, 10.0, 10.0, 1e9])
    edge = np.array([0.0, 3.0, 11.0, 123_456_789.0])
    smallest = queueing.smallest_integer(lambda n: n >= edge, np.zeros(4), high)
    np.testing.assert_array_equal(smallest, [0, 3, 11, 123_456_789])
    largest = queueing.largest_integer(lambda n: n <= edge, np.zeros(4), high)
    np.testing.assert_array_equal(largest, [0, 3, 10, 123_456_789])


def _llama(**kwargs) -> pd.DataFrame:
    w = InferenceWorkload(
        params=LLAMA3_70B_PARAMS, shape=LLAMA3_70B, weight_precision="fp8", kv_precision="fp8",
        input_tokens=1000, output_tokens=500, **kwargs,
    )  # fmt: skip
    frame = evaluate_inference(pd.DataFrame([H100_SXM]), w)
    return frame[frame["feasible"]].set_index("tp")


def test_p95_is_never_below_the_typical_value():
    frame = _llama(requests_per_s=37)
    assert (frame["tpot_p95_ms"] >= frame["tpot_ms"]).all()
    assert (frame["ttft_p95_ms"] >= frame["ttft_ms"]).all()
    # Sized to 99 % of the TP2 replicas' capacity the queue is long: seconds, not milliseconds.
    tp2 = frame.loc[2]
    busy_rps = 0.99 * tp2["replicas"] * tp2["replica_tokens_per_s"] / 500
    busy = _llama(requests_per_s=busy_rps).loc[2]
    assert busy["utilization"] > 0.98
    assert busy["ttft_p95_ms"] > 10 * busy["ttft_ms"]


def test_a_p95_ttft_bound_adds_replicas_until_met():
    free = _llama(requests_per_s=37)
    bound = _llama(requests_per_s=37, ttft_p95_ms=200)
    assert (bound["ttft_p95_ms"] <= 200).all()
    assert (bound["cards"] >= free.loc[bound.index, "cards"]).all()
    added = bound["cards"] > free.loc[bound.index, "cards"]
    assert added.any()  # the busy degrees needed one more replica
    for tp in bound.index[added]:  # one replica fewer would break the bound
        fewer = bound.loc[tp, "replicas"] - 1
        batch, service = bound.loc[tp, "batch"], bound.loc[tp, "tpot_ms"] / 1e3 * 500
        wait = queueing.wait_p95_seconds(fewer * batch, service, 37.0)
        assert bound.loc[tp, "ttft_ms"] + wait * 1e3 > 200


def test_given_cards_serve_less_to_meet_a_p95_ttft_bound():
    full = _llama(cards=8)
    assert full["ttft_p95_ms"].map(np.isinf).all()  # at full load the queue never settles
    bound = _llama(cards=8, ttft_p95_ms=1000)
    assert (bound["ttft_p95_ms"] <= 1000).all()
    assert (bound["utilization"] < 1).all() and (bound["utilization"] > 0.9).all()
    assert (bound["tokens_per_s"] < full.loc[bound.index, "tokens_per_s"]).all()


def test_a_p95_tpot_bound_takes_the_largest_batch_that_meets_it():
    bound = _llama(requests_per_s=10, tpot_p95_ms=40)
    assert (bound["tpot_p95_ms"] <= 40).all()
    for tp, row in bound.iterrows():
        one_more = np.array([row["batch"] + 1.0])
        terms = terms_from_columns(bound.loc[[tp]])
        starts = queueing.poisson_p95(one_more)
        slower = roofline.tpot_seconds(terms, one_more, row["prefill_ms"] / 1e3, 500, starts)
        assert slower[0] * 1e3 > 40, tp

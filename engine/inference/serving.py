"""Serving definitions of the five factors for an inference pool (docs/efficiency-model.md,
"Serving pools"), vectorised. Analyses apply them to inference pools through
planner/serving_factors.py.

    energy        1 / PUE, as for training;
    mfu  -> mbu   memory traffic of the pool running at its modeled capacity / the cards'
                  peak bandwidth (how well a busy replica uses its bandwidth);
    scaling       1: replicas serve independently, there is no pipeline or all-reduce loss;
    effective_time -> availability  the share of time a replica (tp cards, any card's failure
                  stops it) is up: MTBF_replica / (MTBF_replica + repair time);
    utilization   served tokens/s / the capacity the model gives those cards (measured load),
                  capped at 1.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray


def _f(value: ArrayLike) -> NDArray[np.float64]:
    return np.asarray(value, dtype=np.float64)


def availability(
    mtbf_card_hours: ArrayLike, tp: ArrayLike, repair_h: ArrayLike
) -> NDArray[np.float64]:
    """Share of time a replica of `tp` cards is up; a failure of any of its cards stops it."""
    replica_mtbf = _f(mtbf_card_hours) / _f(tp)
    return replica_mtbf / (replica_mtbf + _f(repair_h))


def serving_utilization(
    served_tokens_per_s: ArrayLike, capacity_tokens_per_s: ArrayLike
) -> NDArray[np.float64]:
    """Measured load over modeled capacity, in [0, 1]; NaN when either is unknown or zero."""
    served, capacity = _f(served_tokens_per_s), _f(capacity_tokens_per_s)
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(capacity > 0, served / capacity, np.nan)
    return np.minimum(share, 1.0)


def pool_mbu(
    served_tokens_per_s: ArrayLike,
    bytes_per_token: ArrayLike,
    cards: ArrayLike,
    bandwidth_tbs: ArrayLike,
) -> NDArray[np.float64]:
    """Bytes the served tokens move per second over the pool's peak bandwidth.

    `bytes_per_token` is what one decoded token costs in traffic at the replica's batch:
    (weights per card × tp) / batch + the KV cache read per sequence and, for a mixture of
    experts, its hidden state around the experts (sizing.py columns).
    """
    moved = _f(served_tokens_per_s) * _f(bytes_per_token)
    return moved / (_f(cards) * _f(bandwidth_tbs) * 1e12)


def bytes_per_token(
    weights_per_card: ArrayLike,
    tp: ArrayLike,
    batch: ArrayLike,
    kv_read_per_card: ArrayLike,
    hidden_state_per_card: ArrayLike = 0.0,
) -> NDArray[np.float64]:
    """Memory traffic of one decoded token: the replica's weights shared by the batch, plus
    the sequence's KV cache read and, around an MoE's experts, its hidden state, which every
    card pays whole (the option's `hidden_state_bytes_per_sequence`, 0 for a dense model;
    per card figures × tp), as the step time charges them (step_terms.py)."""
    per_sequence = _f(kv_read_per_card) + _f(hidden_state_per_card)
    return _f(tp) * (_f(weights_per_card) / _f(batch) + per_sequence)


def serving_factors(
    pue: ArrayLike,
    mbu: ArrayLike,
    availability_share: ArrayLike,
    utilization: ArrayLike,
) -> dict[str, NDArray[np.float64]]:
    """The five serving factors and their product (`effective_serving_utilization`).

    `mbu` is the pool's MBU at capacity; with utilization = served / capacity the product
    mbu × utilization is the bandwidth share the served load actually moves (no double count).
    """
    factors = {
        "energy": 1.0 / _f(pue),
        "mbu": _f(mbu),
        "scaling": np.ones_like(_f(mbu)),
        "availability": _f(availability_share),
        "utilization": _f(utilization),
    }
    product = np.prod(np.broadcast_arrays(*factors.values()), axis=0)
    return {**factors, "effective_serving_utilization": product}

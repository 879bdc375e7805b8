"""The typed records (engine/records.py) say what the engine's frames really hold."""

from __future__ import annotations

import typing

import pandas as pd

from engine.capacity import TrainingWorkload, plan_capacity
from engine.evaluate import evaluate_pools
from engine.records import PlanOptionRow, PoolMeasure, PoolResultRow, PoolRow
from tests.support.capacity_inputs import H100_SXM
from tests.support.engine_rows import A100, H100, group


def test_every_pool_measure_is_a_pool_column():
    assert set(typing.get_args(PoolMeasure)) <= set(PoolRow.__annotations__)


def test_the_pool_result_record_is_the_result_frame_in_order():
    groups = pd.DataFrame([group("mixed", H100, 16), group("mixed", A100, 8), group("a", A100, 8)])
    pools = pd.DataFrame(
        [
            {"pool_id": "mixed", "site_id": 1, "cluster_id": 1},
            {"pool_id": "a", "site_id": 1, "cluster_id": 2, "pue": 1.3},
        ]
    )
    result = evaluate_pools(groups, pools)
    assert list(result.columns) == list(PoolResultRow.__annotations__)


def test_the_plan_option_record_leads_every_plan_row():
    workload = TrainingWorkload(params=7e9, tokens=1e11, seq_len=4096, global_batch_sequences=256)
    options = pd.DataFrame([{**H100_SXM, "rental_price_per_card_hour": 2.0, "cards": 64}])
    plan = plan_capacity(workload, options)
    leading = list(PlanOptionRow.__annotations__)
    assert list(plan.columns[: len(leading)]) == leading

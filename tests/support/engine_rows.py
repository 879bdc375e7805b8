"""Node-group and pool rows for the engine's tests (pure Python: no Django needed)."""

from __future__ import annotations

import pandas as pd

# Dense BF16 peaks as in inventory/fixtures/accelerators.csv; NVLink figures both directions.
A100 = {
    "accelerator": "A100 SXM4 80GB",
    "vendor": "NVIDIA",
    "peak_tflops": 312.0,
    "nvlink_bidir_gbs": 600.0,
}
H100 = {
    "accelerator": "H100 SXM5 80GB",
    "vendor": "NVIDIA",
    "peak_tflops": 989.0,
    "nvlink_bidir_gbs": 900.0,
}
V100 = {
    "accelerator": "V100 SXM2 32GB",
    "vendor": "NVIDIA",
    "peak_tflops": 125.0,
    "nvlink_bidir_gbs": 300.0,
}
ASCEND_910B = {
    "accelerator": "Ascend 910B",
    "vendor": "Huawei",
    "peak_tflops": 320.0,
    "nvlink_bidir_gbs": 392.0,
}


def group(
    pool_id: object, card: dict, cards: int, cards_per_node: int = 8, **extra: object
) -> dict:
    """One node-group row holding ``cards`` cards (``cards`` must divide by ``cards_per_node``)."""
    assert cards % cards_per_node == 0
    return {
        "pool_id": pool_id,
        **card,
        "nodes": cards // cards_per_node,
        "cards_per_node": cards_per_node,
        **extra,
    }


def frames(groups: list[dict], pools: list[dict]) -> tuple[pd.DataFrame, pd.DataFrame]:
    return pd.DataFrame(groups), pd.DataFrame(pools)

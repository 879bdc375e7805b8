"""An analysis's factor rows (per pool, cluster or site) as flat table rows for exports.

`planner.analysis.summarise` stores them in ``Analysis.results`` under "pools", "clusters"
and "sites"; each row carries ids, labels, the five factors with their provenance, the
product and the costs, named as in docs/efficiency-model.md. A training pool that names its
catalog model also says which parameter counts its MFU and scaling used (`training_params`).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from planner.models import Analysis

ROW_SCOPES = ("pool", "cluster", "site")
_RESULT_KEYS = {"pool": "pools", "cluster": "clusters", "site": "sites"}
TRAINING_PARAMS = "training_params"


def factor_rows(analysis: Analysis, scope: str) -> list[dict[str, Any]]:
    """The stored rows of one scope, each with the analysis id first."""
    rows = (analysis.results or {}).get(_RESULT_KEYS[scope]) or []
    return [{"analysis_id": analysis.pk, **row} for row in rows]


def _billions(params: float) -> str:
    return f"{params / 1e9:.3g} B"


def params_provenance(name: str, total: float, active: float, replicated: float) -> str:
    """Which counts a named model's MFU and scaling used, e.g. "active 37.6 B of 671 B,
    catalog DeepSeek-V3; gradients of 17.1 B replicated over data parallelism"."""
    if active >= total:
        return f"all {_billions(total)} active, catalog {name}"
    return (
        f"active {_billions(active)} of {_billions(total)}, catalog {name}; gradients of "
        f"{_billions(replicated)} replicated over data parallelism"
    )


def with_training_params(result: pd.DataFrame, pools: pd.DataFrame) -> pd.DataFrame:
    """Add `training_params` to the rows of pools that name a catalog model (None for the
    others and for inference pools, whose serving loads say theirs: `serving_params`).
    Unchanged when no pool names one, so such analyses store what they stored before."""
    if "model_name" not in pools:
        return result
    inputs = pools.set_index("pool_id").reindex(result.index)
    texts = [
        params_provenance(name, total, active, replicated)
        if isinstance(name, str) and name and purpose != "inference"
        else None
        for name, total, active, replicated, purpose in zip(
            inputs["model_name"],
            inputs["model_params"],
            inputs["model_active_params"],
            inputs["model_replicated_params"],
            inputs["purpose"],
            strict=True,
        )
    ]
    return result.assign(**{TRAINING_PARAMS: pd.Series(texts, index=result.index, dtype=object)})

"""An analysis's factor rows (per pool, cluster or site) as flat table rows for exports.

`planner.analysis.summarise` stores them in ``Analysis.results`` under "pools", "clusters"
and "sites"; each row carries ids, labels, the five factors with their provenance, the
product and the costs, named as in docs/efficiency-model.md.
"""

from __future__ import annotations

from typing import Any

from planner.models import Analysis

ROW_SCOPES = ("pool", "cluster", "site")
_RESULT_KEYS = {"pool": "pools", "cluster": "clusters", "site": "sites"}


def factor_rows(analysis: Analysis, scope: str) -> list[dict[str, Any]]:
    """The stored rows of one scope, each with the analysis id first."""
    rows = (analysis.results or {}).get(_RESULT_KEYS[scope]) or []
    return [{"analysis_id": analysis.pk, **row} for row in rows]

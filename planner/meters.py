"""Site meter readings count as measured only for analyses inside their metered period.

Outside it (or when an analysis reaches beyond it) the readings' PUE is still the best ratio
the site has, so the engine uses it, labelled *modeled* with basis
``metered_kwh_other_period`` (docs/efficiency-model.md, "Coverage and provenance").
A site whose readings have no period is taken at its word, as before.
"""

from __future__ import annotations

import datetime as dt

import pandas as pd

from inventory.models import Site


def flag_meters_outside_period(
    pools: pd.DataFrame, period_start: dt.datetime, period_end: dt.datetime
) -> pd.DataFrame:
    """Pools with ``meters_outside_period`` = 1 where the site's metered period misses ours."""
    if pools.empty or "site_id" not in pools:
        return pools
    periods = {
        pk: (start, end)
        for pk, start, end in Site.objects.filter(pk__in=set(pools["site_id"])).values_list(
            "pk", "metered_period_start", "metered_period_end"
        )
    }
    first_day = period_start.date()
    last_day = (period_end - dt.timedelta(microseconds=1)).date()

    def outside(site_id: int) -> float:
        start, end = periods.get(site_id, (None, None))
        if start is None and end is None:
            return 0.0
        begins_after = start is not None and first_day < start
        ends_before = end is not None and last_day > end
        return 1.0 if begins_after or ends_before else 0.0

    return pools.assign(meters_outside_period=pools["site_id"].map(outside).astype("float64"))

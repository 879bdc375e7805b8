"""A cluster without capital cost or rental price: its ownership cost is unknown, never 0.

The cluster "alpha" (`tests.support.builders.alpha_cluster`) with its capital cost removed.
Energy is still priced (tariff, PUE); total, idle and lost money are no data on every
surface, each with the reason naming the cluster.
"""

from __future__ import annotations

import re

import pytest

from accounting import selectors
from planner import services
from tests.support.alpha_usage import DAY_END, DAY_START, sacct_text
from tests.support.inline import run_analysis_inline

pytestmark = pytest.mark.django_db
REASON = "cluster alpha has no capital cost or rental price"


@pytest.fixture
def unpriced(alpha):
    alpha.capital_cost_per_card = None
    alpha.amortization_years = None
    alpha.save()
    return alpha


def _analysis(django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=False):
        analysis = services.start_analysis(
            scope="fleet", period_start=DAY_START, period_end=DAY_END
        )
    return run_analysis_inline(analysis)


def test_analysis_has_no_total_cost_and_says_why(unpriced, django_capture_on_commit_callbacks):
    analysis = _analysis(django_capture_on_commit_callbacks)
    pool = analysis.results["pools"][0]
    assert pool["total_cost"] is None
    assert pool["energy_cost"] > 0  # 16 cards' power at 0.20 per kWh and PUE 1.25
    assert pool["cost_reason"].startswith(REASON)
    assert analysis.results["summary"]["total_cost"] is None
    assert any(note.startswith(REASON) for note in analysis.results["summary"]["notes"])


def test_priced_cluster_has_no_reason(alpha, django_capture_on_commit_callbacks):
    pool = _analysis(django_capture_on_commit_callbacks).results["pools"][0]
    assert pool["cost_reason"] is None and pool["total_cost"] > 0


def test_costs_and_chargeback_leave_it_out_and_name_it(unpriced, import_text):
    import_text(unpriced, sacct_text())
    scope = selectors.AccountingScope(DAY_START, DAY_END, "total", idle_rule="proportional")
    costs = selectors.cost_report(scope)
    [total] = costs["totals"]
    assert total["total_cost"] is None and total["idle_cost"] is None
    assert total["compute_cost"] is None
    assert total["energy_cost"] > 0
    assert total["allocated_card_hours"] > 0  # the usage is still measured
    assert any(w.startswith("Cluster alpha has no capital cost") for w in costs["warnings"])
    chargeback = selectors.chargeback_report(scope)
    assert chargeback["rows"] == []  # nothing to charge: no team pays an unknown price
    assert any(w.startswith("Cluster alpha has no capital cost") for w in chargeback["warnings"])


def test_pages_show_the_reason_not_a_zero(
    unpriced, client, viewer, django_capture_on_commit_callbacks, import_text
):
    import_text(unpriced, sacct_text())
    analysis = _analysis(django_capture_on_commit_callbacks)
    client.force_login(viewer)
    page = client.get(f"/analyses/{analysis.pk}/").content.decode()
    assert "Cluster alpha has no capital cost or rental price" in page
    costs = client.get(
        "/costs/", {"start": DAY_START.date().isoformat(), "end": DAY_END.date().isoformat()}
    ).content.decode()
    assert "Cluster alpha has no capital cost or rental price" in costs
    main = costs.split("<main", 1)[-1]
    assert not re.search(
        r"\b(?:nan|NaN|None)\b", re.sub(r"<script.*?</script>", "", main, flags=re.S)
    )

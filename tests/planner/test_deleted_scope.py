"""An analysis whose cluster was deleted before it ran fails, naming the deleted cluster."""

from __future__ import annotations

import datetime as dt

import pytest


@pytest.mark.django_db
def test_analysis_of_a_deleted_cluster_fails_with_the_reason(alpha):
    from planner.models import Analysis
    from planner.tasks import run_analysis

    end = dt.datetime(2024, 3, 2, tzinfo=dt.UTC)
    analysis = Analysis.objects.create(
        scope="cluster",
        object_id=alpha.pk,
        scope_label=str(alpha),
        period_start=end - dt.timedelta(days=1),
        period_end=end,
    )
    alpha.delete()
    run_analysis(analysis.pk, str(analysis.run_id))
    analysis.refresh_from_db()
    assert analysis.status == "failed" and analysis.results is None
    assert f"cluster analysed (id {analysis.object_id}) was deleted" in analysis.error

"""A fleet with something in every list: demo inventory, the 16-card "alpha" cluster with
usage and sreport rows, a gres alias, a partition mapping, a finished analysis and plan.
(Reading the files back: tests/support/tabular.py.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.support.alpha_usage import SREPORT_TEXT, sacct_text
from tests.support.builders import plan_payload, serving_load
from tests.support.inline import finished_analysis, run_plan_inline


@pytest.fixture
def fleet(demo_fleet, alpha, import_text, planner, django_capture_on_commit_callbacks):
    from accounting.models import GresAlias, PartitionMapping
    from inventory.models import AcceleratorModel, Pool

    import_text(alpha, sacct_text())
    import_text(alpha, SREPORT_TEXT, kind="sreport")
    h100 = AcceleratorModel.objects.get(name="H100 SXM5 80GB")
    GresAlias.objects.create(gres_type="hopper", accelerator=h100, notes="site name")
    PartitionMapping.objects.create(cluster=alpha, partition="h100", pool=alpha.pools.first())
    serving_load(Pool.objects.get(name="serving-l40s"))  # a month on the demo's inference pool
    with django_capture_on_commit_callbacks(execute=False):
        analysis = finished_analysis()
        from rest_framework.test import APIClient

        client = APIClient()
        client.force_login(planner)
        plan = client.post("/api/v1/plans/", plan_payload(), format="json").json()
    run_plan_inline(plan["id"])
    return SimpleNamespace(alpha=alpha, analysis=analysis, plan_id=plan["id"])

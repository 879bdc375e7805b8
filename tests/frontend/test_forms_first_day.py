"""Issue 31, "Forms": the planner's utilization field and header, the band in words, a usage
file kept from its preview to its import with thousands separators, a queued report that says
so, and a confirmation page before a spreadsheet link is revoked."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from django.core.files.storage import default_storage
from django.core.files.uploadedfile import SimpleUploadedFile

from frontend.dashboards.plan_facts import batch_summary, utilization_summary
from tests.support.alpha_usage import H100_8, SACCT_LINES, sacct_text
from tests.support.inline import run_plan_inline

pytestmark = pytest.mark.django_db

PLANNER_URL = "/planner/"
IMPORT_URL = "/usage/import/"


@pytest.fixture(autouse=True)
def media(settings, tmp_path):
    """Kept and imported files go to a fresh folder per test (never into var/media)."""
    settings.MEDIA_ROOT = str(tmp_path / "media")


def plan_form(**changes) -> dict:
    from inventory.models import AcceleratorModel, Site

    data = {
        "name": "Llama-like",
        "params_billions": "175",
        "tokens_billions": "300",
        "flops_per_param_token": "6",
        "precision": "bf16",
        "seq_len": "8192",
        "global_batch_sequences": "1536",  # the form's initial value, sent with the tokens
        "global_batch_million_tokens": "16",
        "zero_stage": "1",
        "parallelism": "choose",
        "accelerators": [str(AcceleratorModel.objects.get(name="H100 SXM5 80GB").pk)],
        "size_mode": "cards",
        "cards": "1024",
        "sites": [str(Site.objects.get(name="Frankfurt DC1 (air)").pk)],
        "history_days": "90",
        "cost_basis": "rental",
    }
    return {k: v for k, v in (data | changes).items() if v is not None}


def computed_plan(client, capture, **changes):
    from planner.models import Plan

    with capture(execute=False):
        response = client.post(PLANNER_URL, plan_form(**changes))
    assert response.status_code == 302, response.content.decode()[:2000]
    plan = Plan.objects.order_by("-pk").first()
    run_plan_inline(plan.pk)
    plan.refresh_from_db()
    assert plan.status == "succeeded", plan.error
    return plan


def only_option(plan) -> dict:
    from frontend.dashboards.planner import options_frame

    rows = options_frame(plan).to_dict("records")
    assert len(rows) == 1
    return rows[0]


def test_the_planner_utilization_field_sets_every_options_utilization(
    client, planner, demo_fleet, django_capture_on_commit_callbacks
):
    client.force_login(planner)
    shared = computed_plan(client, django_capture_on_commit_callbacks)
    dedicated = computed_plan(client, django_capture_on_commit_callbacks, utilization_percent="100")
    assert shared.overrides == {} and dedicated.overrides == {"utilization": 1.0}
    a, b = only_option(shared), only_option(dedicated)
    # Worked by hand: days = running days ÷ utilization; the running days do not change.
    assert a["utilization"] == 0.5 and b["utilization"] == 1.0
    assert b["utilization_provenance"] == "override"
    assert a["running_days"] == pytest.approx(b["running_days"], rel=1e-9)
    assert a["days"] == pytest.approx(a["running_days"] / 0.5, rel=1e-9)
    assert b["days"] == pytest.approx(b["running_days"], rel=1e-9)
    assert a["days"] == pytest.approx(2 * b["days"], rel=1e-9)

    page = client.get(f"{PLANNER_URL}{dedicated.pk}/").content.decode()
    # The header: the batch as entered (16e6 / 8,192 = 1,953.1 → 1,953 whole sequences).
    assert "16 M tokens as entered (1,953 sequences × 8,192 tokens)" in page
    assert "1536 sequences" not in page and "1,536 sequences" not in page
    assert "100% for every option (entered with the plan)" in page
    assert "10th to 90th percentile" in page  # the band in words, not only in a tooltip
    default = client.get(f"{PLANNER_URL}{shared.pk}/").content.decode()
    assert "else 50% (default: an industry figure)" in default


@pytest.mark.parametrize(
    ("value", "message"),
    [("0", "greater than or equal to 1"), ("150", "less than or equal to 100")],
)
def test_a_utilization_outside_1_to_100_percent_is_refused(
    client, planner, demo_fleet, value, message
):
    client.force_login(planner)
    response = client.post(PLANNER_URL, plan_form(utilization_percent=value))
    assert response.status_code == 200 and message in response.content.decode()


def test_the_batch_in_sequences_and_its_growth_read_as_entered():
    assert batch_summary({"global_batch_sequences": 1536, "seq_len": 2048}) == (
        "1,536 sequences × 2,048 tokens (3.146 M tokens)"  # 1,536 × 2,048 = 3,145,728
    )
    grown = batch_summary(
        {"model_params": 8e9, "tokens": 1e12, "seq_len": 4096, "global_batch_tokens": 4e6}
        | {"max_batch_tokens": 16e6}
    )
    # 4e6 / 4,096 = 976.6 → 977 sequences.
    assert grown == (
        "4 M tokens as entered (977 sequences × 4,096 tokens), growing with data "
        "parallelism up to 16 M tokens"
    )
    assert utilization_summary({"utilization": 0.8}).startswith("80% for every option")


# -- the usage import keeps its file after a preview ------------------------------------------

# One more job of 8 cards for 7 days 6 hours: 174 h × 8 = 1,392 card-hours, plus the day's
# 48 + 48 + 16 = 112 of tests/support/alpha_usage.py: 1,504 card-hours in 4 records.
LONG_JOB = (
    "1006|1006|alpha|h100|team-a|ann|2024-01-31T23:00:00|2024-02-01T00:00:00|"
    f"2024-02-08T06:00:00|7-06:00:00|COMPLETED|1|{H100_8}|gpu001|"
)
SACCT = sacct_text([*SACCT_LINES, LONG_JOB])


def import_form(cluster, **fields) -> dict:
    return {"cluster": cluster.pk, "kind": "sacct", "timezone": "UTC", **fields}


def kept_token(html: str) -> str:
    return re.search(r'<input type="hidden" name="kept_upload" value="([^"]+)"', html).group(1)


def test_a_previewed_file_is_imported_without_choosing_it_again(
    client, planner, alpha, django_capture_on_commit_callbacks
):
    from accounting.models import ImportJob
    from frontend.kept_uploads import SESSION_KEY

    client.force_login(planner)
    upload = SimpleUploadedFile("week-7.txt", SACCT.encode(), content_type="text/plain")
    preview = client.post(IMPORT_URL, import_form(alpha, action="preview", file=upload))
    html = preview.content.decode()
    assert preview.status_code == 200 and ImportJob.objects.count() == 0
    assert 'data-preview="card-hours">1,504.0<' in html
    assert "Your file is kept: week-7.txt" in html
    assert re.search(r'<td class="num">1,392.0</td>|<td class="num">1,504.0</td>', html)
    kept_path = client.session[SESSION_KEY]["path"]
    assert default_storage.open(kept_path).read() == SACCT.encode()

    with django_capture_on_commit_callbacks(execute=False):
        response = client.post(IMPORT_URL, import_form(alpha, kept_upload=kept_token(html)))
    job = ImportJob.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/usage/import/{job.pk}/"
    assert job.source_name == "week-7.txt" and job.file.read() == SACCT.encode()
    assert not default_storage.exists(kept_path) and SESSION_KEY not in client.session


def test_a_kept_file_answers_only_its_own_session(client, planner, alpha):
    client.force_login(planner)
    upload = SimpleUploadedFile("week-7.txt", SACCT.encode())
    html = client.post(IMPORT_URL, import_form(alpha, action="preview", file=upload))
    token = kept_token(html.content.decode())

    from django.test import Client

    other = Client()
    other.force_login(planner)
    refused = other.post(IMPORT_URL, import_form(alpha, kept_upload=token))
    assert refused.status_code == 400 and "Choose a file or paste its text." in (
        refused.content.decode()
    )
    forged = client.post(IMPORT_URL, import_form(alpha, kept_upload="not-the-token"))
    assert forged.status_code == 400


def test_a_refused_import_keeps_the_chosen_file_for_the_next_try(client, planner, alpha):
    from accounting.models import ImportJob

    client.force_login(planner)
    upload = SimpleUploadedFile("week-7.txt", SACCT.encode())
    refused = client.post(IMPORT_URL, import_form(alpha, timezone="Mars/Olympus", file=upload))
    html = refused.content.decode()
    assert refused.status_code == 400 and ImportJob.objects.count() == 0
    assert "Your file is kept: week-7.txt" in html and kept_token(html)


# -- a queued report, a revoked link --------------------------------------------------------


def test_a_queued_report_says_it_is_queued_not_archived_only(client, planner):
    from reports import periods
    from reports import services as reports
    from reports.models import ReportSchedule

    schedule = reports.save_schedule(
        ReportSchedule(name="Weekly", frequency="weekly", timezone="UTC", formats=["xlsx"])
    )
    end = dt.datetime(2024, 3, 4, tzinfo=dt.UTC)
    report, _ = reports.get_or_create_report(
        schedule, periods.Period(end - dt.timedelta(days=7), end)
    )
    client.force_login(planner)
    html = client.get(f"/reports/{report.pk}/").content.decode()
    text = re.search(r'<span class="report-delivery">(.*?)</span>', html).group(1)
    assert text.startswith("Queued: once a worker has generated it, it is e-mailed")
    assert "archived only" not in html


def test_revoking_a_link_asks_first_and_the_answer_decides(client, viewer):
    from exports import services
    from exports.models import ExportToken

    token, _ = services.create_token(
        owner=viewer, name="Sites sheet", url="/api/v1/sites/", fmt="csv", expires_in_days=30
    )
    client.force_login(viewer)
    listed = client.get("/spreadsheet-links/").content.decode()
    assert f'href="/spreadsheet-links/{token.pk}/revoke/"' in listed
    ask = client.get(f"/spreadsheet-links/{token.pk}/revoke/")
    html = ask.content.decode()
    assert ask.status_code == 200 and "Revoke the link “Sites sheet”?" in html
    assert "410 Gone" in html and "Revoke the link</button>" in html
    assert ExportToken.objects.get(pk=token.pk).state == "active"  # asking revokes nothing
    done = client.post(f"/spreadsheet-links/{token.pk}/revoke/")
    assert done.status_code == 302 and ExportToken.objects.get(pk=token.pk).state == "revoked"
    again = client.get(f"/spreadsheet-links/{token.pk}/revoke/").content.decode()
    assert "already revoked" in again and "Revoke the link</button>" not in again

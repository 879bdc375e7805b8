"""Real-shaped Slurm exports through manage.py import_usage and the API into the database.

Cluster "orion": 4 A100 SXM4 40GB + 8 H100 SXM5 80GB in service all of February 2025, so
the inventory gives 12 x 672 h = 8,064 card-hours that month (the fixture reports 8,064).
"""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command
from django.db.models import Sum

from accounting.models import ImportJob, SreportUtilization, UsageRecord

FIXTURES = Path(__file__).parent / "parsing" / "fixtures"


@pytest.fixture
def orion(db):
    from inventory.catalog import load_catalog
    from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

    load_catalog(AcceleratorModel)
    site = Site.objects.create(name="Lab", cooling_type="air", pue=1.3, tariff_per_kwh=0.2)
    cluster = Cluster.objects.create(
        site=site, name="orion", commissioned_on=dt.date(2024, 6, 1), capital_cost_per_card=1.0
    )
    pool = Pool.objects.create(cluster=cluster, name="gpu", planned_utilization=0.7)
    for name, model, nodes in (("a", "A100 SXM4 40GB", 1), ("h", "H100 SXM5 80GB", 2)):
        NodeGroup.objects.create(
            pool=pool,
            name=name,
            accelerator=AcceleratorModel.objects.get(name=model),
            node_count=nodes,
            cards_per_node=4,
        )
    return cluster


def run(name: str, kind: str, *options: str) -> None:
    call_command(
        "import_usage", str(FIXTURES / name), "--kind", kind, "--cluster", "orion", *options
    )


def test_gpu_rows_of_a_mixed_tres_report_are_stored_and_checked_against_inventory(orion):
    run("sreport_gpu_mixed_tres.txt", "sreport", "--no-progress")
    rows = {row.tres_name: row for row in SreportUtilization.objects.all()}
    assert set(rows) == {"gres/gpu", "gres/gpu:a100", "gres/gpu:nvidia_h100_80gb_hbm3"}
    assert rows["gres/gpu"].reported_card_hours == 8064
    assert rows["gres/gpu:nvidia_h100_80gb_hbm3"].accelerator.name == "H100 SXM5 80GB"
    job = ImportJob.objects.get()
    assert any("1 cpu" in warning for warning in job.warnings)


def test_reported_above_the_inventory_is_refused_naming_both_numbers(orion):
    orion.pools.get().node_groups.filter(name="a").delete()
    with pytest.raises(CommandError) as raised:
        run("sreport_gpu_mixed_tres.txt", "sreport", "--no-progress")
    assert "Reported 8,064 card-hours is more than 5% above the 5,376 card-hours" in str(
        raised.value
    )
    assert SreportUtilization.objects.count() == 0


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("sreport_cpu_default.txt", "this is a CPU report: run sreport -P -t hours -T gres/gpu"),
        ("sreport_cpu_hours_banner.txt", "this is a CPU report"),
        ("sreport_billing.txt", "no gres/gpu rows (this report has billing)"),
    ],
)
def test_cpu_and_billing_reports_store_nothing(orion, name, message):
    with pytest.raises(CommandError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run(name, "sreport", "--no-progress")
    assert SreportUtilization.objects.count() == 0


def test_bannerless_headerless_report_with_period_unit_and_columns(orion):
    run(
        "sreport_gpu_noheader_minutes.txt",
        "sreport",
        "--columns-preset",
        "default",
        "--time-unit",
        "minutes",
        "--period-start",
        "2025-02-01",
        "--period-end",
        "2025-03-01",
        "--no-progress",
    )
    row = SreportUtilization.objects.get()
    assert (row.allocated_card_hours, row.reported_card_hours) == (5280, 8064)


def test_account_utilization_by_user_is_stored_as_team_usage(orion):
    run("sreport_account_by_user.txt", "sreport", "--no-progress")
    per_team = dict(
        UsageRecord.objects.values("account")
        .annotate(h=Sum("card_hours"))
        .values_list("account", "h")
    )
    assert per_team == pytest.approx(
        {"bio": 660.0, "lattice": 1520.0, "physics": 2700.0, "physics-qcd": 400.0}
    )


def test_sacct_layouts_through_the_command(orion, caplog):
    caplog.set_level(logging.WARNING)
    run("sacct_xdmod_noheader.txt", "sacct", "--columns-preset", "xdmod", "--no-progress")
    run("sacct_snowman_tot.txt", "sacct", "--no-progress")
    per_team = dict(
        UsageRecord.objects.values("account")
        .annotate(h=Sum("card_hours"))
        .values_list("account", "h")
    )
    # Hand counts: xdmod file physics 16, lattice 208, bio 1; snowman file physics 16, lattice 6.
    assert per_team == pytest.approx({"bio": 1.0, "lattice": 214.0, "physics": 32.0})
    # The broker connection after commit (not run inside a test transaction) would warn here.
    from kombu import Connection

    from accounting.management.commands.import_usage import NO_HOST_WARNING

    Connection("filesystem://")._info()
    assert not [r for r in caplog.records if "No hostname was supplied" in r.getMessage()]
    logging.getLogger("kombu.connection").removeFilter(NO_HOST_WARNING)
    Connection("filesystem://")._info()
    assert [r for r in caplog.records if "No hostname was supplied" in r.getMessage()]
    with pytest.raises(CommandError, match="time_unit: Only sreport output has a time unit"):
        run("sacct_snowman_tot.txt", "sacct", "--time-unit", "hours")


def test_skipped_lines_are_reported_per_reason_with_examples(orion, tmp_path, capsys):
    run("sacct_xdmod_noheader.txt", "sacct", "--columns-preset", "xdmod", "--no-progress")
    job = ImportJob.objects.get()
    assert job.skipped_lines == [
        {"reason": "pending or never started", "count": 1, "examples": ["5006"]},
        {"reason": "no GPU (CPU jobs)", "count": 1, "examples": ["5005"]},
    ]
    assert "skipped 1: no GPU (CPU jobs) (e.g. 5005)" in capsys.readouterr().out
    # Partition "gpu" is orion's pool: a job there without gres/gpu may be lost GPU work.
    path = tmp_path / "no_gres.txt"
    path.write_text(
        "JobID|Partition|Account|Start|End|Elapsed|State|AllocTRES\n"
        "9001|gpu|bio|2025-02-07T08:00:00|2025-02-07T09:00:00|01:00:00|COMPLETED|"
        "billing=8,cpu=8,mem=32G,node=1\n"
    )
    call_command(
        "import_usage", str(path), "--kind", "sacct", "--cluster", "orion", "--no-progress"
    )
    job = ImportJob.objects.latest("pk")
    assert job.skipped_lines == [
        {
            "reason": "GPU partition gpu but no gres/gpu in AllocTRES",
            "count": 1,
            "examples": ["9001"],
        }
    ]
    assert job.warnings == [
        "1 job(s) skipped: GPU partition gpu but no gres/gpu in AllocTRES (e.g. 9001)"
    ]


def preview(client, name: str, **fields):
    from django.core.files.uploadedfile import SimpleUploadedFile

    form = {
        "file": SimpleUploadedFile(name, (FIXTURES / name).read_bytes()),
        "kind": "sacct",
        "cluster": "orion",
        **fields,
    }
    return client.post("/api/v1/usage-records/import/preview/", form, format="multipart")


def test_preview_shows_cards_pools_teams_and_skips_and_stores_nothing(orion, client_for, planner):
    client = client_for(planner)
    answer = preview(client, "sacct_xdmod_noheader.txt", columns_preset="xdmod")
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["valid"] is True and body["records"] == 3
    assert body["card_hours"] == pytest.approx(225.0)
    cards = {row["gres_type"]: row for row in body["cards"]}
    assert cards["a100"]["card"] == "A100 SXM4 40GB" and cards["a100"]["status"] == "ok"
    assert cards["h100"]["card_hours"] == pytest.approx(17.0)
    assert {row["team"]: row["card_hours"] for row in body["teams"]} == pytest.approx(
        {"lattice": 208.0, "physics": 16.0, "bio": 1.0}
    )
    assert body["partitions"] == [
        {"partition": "gpu", "pool": "gpu", "records": 3, "card_hours": 225.0}
    ]
    assert body["first_start"] == "2025-02-03T09:00:00+00:00"
    assert [row["reason"] for row in body["skipped"]] == [
        "pending or never started",
        "no GPU (CPU jobs)",
    ]
    assert UsageRecord.objects.count() == 0 and ImportJob.objects.count() == 0


def test_preview_asks_for_a_card_when_the_cluster_has_two_variants(orion, client_for, planner):
    from inventory.models import AcceleratorModel, NodeGroup

    NodeGroup.objects.create(
        pool=orion.pools.get(),
        name="a80",
        accelerator=AcceleratorModel.objects.get(name="A100 SXM4 80GB"),
        node_count=1,
        cards_per_node=4,
    )
    body = preview(client_for(planner), "sacct_xdmod_noheader.txt", columns_preset="xdmod").json()
    a100 = {row["gres_type"]: row for row in body["cards"]}["a100"]
    assert a100["card"] is None
    assert a100["status"] == "ambiguous: choose the card with a gres alias for this cluster"
    assert a100["candidates"] == ["A100 SXM4 40GB", "A100 SXM4 80GB"]
    refused = preview(client_for(planner), "sacct_xdmod_noheader.txt").json()
    assert refused["valid"] is False and "no header" in refused["issues"][0]


def test_upload_page_previews_without_storing(orion, client, planner, settings, tmp_path):
    from django.core.files.uploadedfile import SimpleUploadedFile

    settings.MEDIA_ROOT = str(tmp_path / "media")  # the page keeps the previewed file there
    client.force_login(planner)
    snowman = (FIXTURES / "sacct_snowman_tot.txt").read_bytes()
    response = client.post(
        "/usage/import/",
        {
            "cluster": orion.pk,
            "kind": "sacct",
            "timezone": "UTC",
            "action": "preview",
            "file": SimpleUploadedFile("snowman.txt", snowman),
        },
    )
    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-preview="card-hours">22.0<' in html  # 16 (physics) + 6 (MIG, lattice)
    assert 'data-gres="a100_3g.20gb"' in html and "A100 SXM4 40GB" in html
    assert ImportJob.objects.count() == 0 and UsageRecord.objects.count() == 0
    report = client.post(
        "/usage/import/",
        {
            "cluster": orion.pk,
            "kind": "sreport",
            "timezone": "UTC",
            "action": "preview",
            "pasted_text": (FIXTURES / "sreport_fixed_width.txt").read_text(),
        },
    )
    assert report.status_code == 200
    assert 'data-preview="card-hours">5,280.0<' in report.content.decode()  # Allocated
    assert ImportJob.objects.count() == 0


def test_an_sreport_preview_has_the_fields_of_the_import(orion, client_for, planner):
    from django.core.files.uploadedfile import SimpleUploadedFile

    text = (FIXTURES / "sreport_account_by_user.txt").read_bytes()
    answer = client_for(planner).post(
        "/api/v1/usage-records/import/preview/",
        {"file": SimpleUploadedFile("teams.txt", text), "kind": "sreport", "cluster": orion.pk},
        format="multipart",
    )
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["valid"] and body["report"] == "cluster AccountUtilizationByUser"
    assert sum(team["card_hours"] for team in body["teams"]) == body["card_hours"]
    assert SreportUtilization.objects.count() == 0 and UsageRecord.objects.count() == 0


def test_the_card_question_is_answered_with_an_alias_for_this_cluster_only(
    orion, client_for, planner
):
    from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool

    a80 = AcceleratorModel.objects.get(name="A100 SXM4 80GB")
    NodeGroup.objects.create(
        pool=orion.pools.get(), name="a80", accelerator=a80, node_count=1, cards_per_node=4
    )
    client = client_for(planner)
    answer = {"gres_type": "A100", "accelerator": "A100 SXM4 80GB", "cluster": orion.pk}
    assert client.post("/api/v1/gres-aliases/", answer, format="json").status_code == 201
    again = client.post("/api/v1/gres-aliases/", answer, format="json")
    assert again.status_code == 400 and "already has an alias for cluster orion" in again.text
    run("sacct_xdmod_noheader.txt", "sacct", "--columns-preset", "xdmod", "--no-progress")
    assert UsageRecord.objects.get(job_id="5003").accelerator == a80
    # Another cluster with both A100s is still asked, not given orion's answer.
    other = Cluster.objects.create(
        site=orion.site, name="vega", commissioned_on=dt.date(2024, 6, 1), capital_cost_per_card=1
    )
    pool = Pool.objects.create(cluster=other, name="gpu", planned_utilization=0.7)
    for name in ("A100 SXM4 40GB", "A100 SXM4 80GB"):
        NodeGroup.objects.create(
            pool=pool,
            name=name,
            accelerator=AcceleratorModel.objects.get(name=name),
            node_count=1,
            cards_per_node=4,
        )
    body = preview(client, "sacct_xdmod_noheader.txt", columns_preset="xdmod", cluster="vega")
    cards = {row["gres_type"]: row for row in body.json()["cards"]}
    assert cards["a100"]["card"] is None


def test_api_takes_the_layout_options_and_refuses_bad_ones(orion, client_for, planner):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client = client_for(planner)

    def post(name: str, **fields):
        form = {
            "file": SimpleUploadedFile(name, (FIXTURES / name).read_bytes()),
            "cluster": "orion",
            **fields,
        }
        return client.post("/api/v1/usage-records/import/", form, format="multipart")

    bad = post("sreport_gpu_noheader_minutes.txt", kind="sreport", time_unit="days")
    assert bad.status_code == 400 and "time_unit" in bad.json()
    ok = post(
        "sreport_gpu_noheader_minutes.txt",
        kind="sreport",
        columns_preset="default",
        time_unit="minutes",
        report_period_start="2025-02-01T00:00:00Z",
        report_period_end="2025-03-01T00:00:00Z",
    )
    assert ok.status_code == 202, ok.content
    job = ImportJob.objects.get(pk=ok.json()["id"])
    assert job.parse_options["time_unit"] == "minutes"
    assert job.parse_options["columns"][1] == "TRES Name"
    snowman = post("sacct_snowman_tot.txt", kind="sacct", delimiter="☃", gpuutil="one-gpu")
    assert snowman.status_code == 202
    assert ImportJob.objects.get(pk=snowman.json()["id"]).parse_options == {
        "delimiter": "☃",
        "gpuutil": "one-gpu",
    }


def test_reqgres_only_files_import_with_a_lower_bound_warning(orion, tmp_path):
    path = tmp_path / "req.txt"
    path.write_text(
        "JobID|Partition|Account|Start|End|Elapsed|State|ReqGRES\n"
        "7101|gpu|bio|2017-06-01T10:00:00|2017-06-01T12:00:00|02:00:00|COMPLETED|gpu:a100:2\n"
    )
    call_command(
        "import_usage", str(path), "--kind", "sacct", "--cluster", "orion", "--no-progress"
    )
    record = UsageRecord.objects.get()
    assert record.card_hours == 4.0 and record.accelerator.name == "A100 SXM4 40GB"
    assert any("ReqGRES" in warning for warning in ImportJob.objects.get().warnings)


def test_fixed_width_report_imports_like_its_parsable_form(orion):
    run("sreport_fixed_width.txt", "sreport", "--no-progress")
    row = SreportUtilization.objects.get()
    assert (row.allocated_card_hours, row.down_card_hours) == (5280, 96)
    assert (row.planned_down_card_hours, row.reported_card_hours) == (48, 8064)

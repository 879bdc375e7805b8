"""``sacct --json`` (and slurmrestd's /slurmdb/vX/jobs) through manage.py import_usage, the
upload checks and the preview, into the database.

The documents are the real Slurm 22.05 captures of tests/accounting/parsing/fixtures (see
sacct_json_NOTES.md there): cluster "fleetwise-test", gpu01 with 8 H100 and gpu02 with 8 A100
(plus 1g.10gb MIG slices). The same jobs exported as ``sacct -P -X`` text must land on the
same records, whichever comes first.
"""

from __future__ import annotations

import datetime as dt
import io
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from accounting import services
from accounting.models import ImportJob, UsageRecord
from accounting.usage_preview import preview_usage

FIXTURES = Path(__file__).parent / "parsing" / "fixtures"
JSON_EXPORT = FIXTURES / "sacct_json_v0038_jobs.json"
TEXT_EXPORT = FIXTURES / "sacct_json_v0038_jobs.txt"
AUTH_ERROR = FIXTURES / "sacct_json_v0038_slurmrestd_auth_error.json"
HOUR_S = 3600.0
# The document's latest time: job 22's end, 2026-11-27T00:20:12Z (Unix 1795738812).
AS_OF = dt.datetime(2026, 11, 27, 0, 20, 12, tzinfo=dt.UTC)
# Cards x seconds of what was submitted (see test_slurm_json.py), the running job 25 up to
# AS_OF (started 00:20:07): H100 2x4 + 1x3; A100 1x3 + 1x3 + 2x3 + 1x5; slices 1/7 x 5 (22),
# 2/7 x 2 (24), 1/7 x 5 (25).
H100_CARD_S = 2 * 4 + 1 * 3
A100_CARD_S = 1 * 3 + 1 * 3 + 2 * 3 + 1 * 5
SLICE_CARD_S = 5 / 7 + 4 / 7 + 5 / 7


@pytest.fixture
def test_cluster(db):
    from inventory.catalog import load_catalog
    from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

    load_catalog(AcceleratorModel)
    site = Site.objects.create(name="Rack", cooling_type="air", pue=1.3, tariff_per_kwh=0.2)
    cluster = Cluster.objects.create(
        site=site, name="fleetwise-test", commissioned_on=dt.date(2026, 1, 1)
    )
    pool = Pool.objects.create(cluster=cluster, name="gpu", planned_utilization=0.7)
    for name, model in (("gpu01", "H100 SXM5 80GB"), ("gpu02", "A100 SXM4 40GB")):
        NodeGroup.objects.create(
            pool=pool,
            name=name,
            accelerator=AcceleratorModel.objects.get(name=model),
            node_count=1,
            cards_per_node=8,
        )
    return cluster


def run(path: Path, *options: str) -> None:
    call_command(
        "import_usage",
        str(path),
        "--kind",
        "sacct",
        "--cluster",
        "fleetwise-test",
        "--no-progress",
        *options,
    )


def stored() -> dict[str, tuple[str, float]]:
    return {r.record_key: (r.job_label, r.card_hours) for r in UsageRecord.objects.all()}


@pytest.mark.parametrize(
    ("first", "second"), [(TEXT_EXPORT, JSON_EXPORT), (JSON_EXPORT, TEXT_EXPORT)]
)
def test_json_and_text_of_the_same_jobs_land_on_the_same_records(test_cluster, first, second):
    run(first)
    records = stored()
    assert len(records) == 9
    run(second)
    again = ImportJob.objects.latest("pk")
    assert (again.records_created, again.records_updated, again.records_unchanged) == (0, 0, 9)
    assert stored() == records
    assert again.as_of == AS_OF and again.as_of_source == "file"


def test_a_json_import_stores_the_cards_and_hours_that_were_submitted(test_cluster, capsys):
    run(JSON_EXPORT)
    by_model: dict[str, float] = {}
    for record in UsageRecord.objects.select_related("accelerator"):
        model = record.accelerator.name if record.accelerator else record.gres_type
        by_model[model] = by_model.get(model, 0.0) + record.card_hours
    assert by_model == pytest.approx(
        {
            "H100 SXM5 80GB": H100_CARD_S / HOUR_S,
            "A100 SXM4 40GB": A100_CARD_S / HOUR_S,
            "1g.10gb": SLICE_CARD_S / HOUR_S,  # a bare MIG profile needs a gres alias
        }
    )
    labels = set(UsageRecord.objects.values_list("job_label", flat=True))
    assert labels == {"18", "19_0", "19_1", "20+0", "20+1", "22", "24", "25"}
    job = ImportJob.objects.get()
    assert job.skipped_lines == [
        {"reason": "GPU partition gpu but no gres/gpu in AllocTRES", "count": 1, "examples": ["23"]}
    ]
    assert any("Card model unknown for gres types 1g.10gb" in w for w in job.warnings)
    assert "9 records (9 new" in capsys.readouterr().out


def test_a_document_with_slurm_errors_stores_nothing_and_says_why(test_cluster):
    with pytest.raises(CommandError) as raised:
        run(AUTH_ERROR)
    assert "nothing imported" in str(raised.value)
    assert "Protocol authentication error (source slurmdb_jobs_get, error_number 1007)" in str(
        raised.value
    )
    assert UsageRecord.objects.count() == 0


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b'{"nodes": [{"name": "gpu01"}]}', "this holds node records"),
        (AUTH_ERROR.read_bytes(), "Slurm answered with errors: Protocol authentication error"),
        (b'{"jobs": [{"job_id": 5, "job_state": ["RUNNING"]}]}', "`squeue --json`"),
    ],
)
def test_an_upload_that_is_not_a_jobs_document_is_refused_at_upload(test_cluster, content, words):
    upload = SimpleUploadedFile("jobs.json", content, content_type="application/json")
    with pytest.raises(services.ImportInputError) as raised:
        services.create_import_job(kind="sacct", cluster=test_cluster, upload=upload, queue=False)
    message = raised.value.errors["file"]
    assert words in message
    assert "`sacct --json`" in message or "Slurm answered" in message  # what to export instead
    assert ImportJob.objects.count() == 0


def test_a_json_upload_is_accepted_and_imported_by_the_worker(test_cluster):
    upload = SimpleUploadedFile("jobs.json", JSON_EXPORT.read_bytes())
    job = services.create_import_job(kind="sacct", cluster=test_cluster, upload=upload, queue=False)
    outcome = services.run_import_job(job.pk, str(job.run_id))
    assert outcome["status"] == "succeeded" and outcome["records_created"] == 9


def test_the_preview_reads_json_as_the_import_does(test_cluster):
    job = ImportJob(kind="sacct", cluster=test_cluster, timezone="UTC", parse_options={})
    from_json = preview_usage(job, io.BytesIO(JSON_EXPORT.read_bytes()))
    from_text = preview_usage(job, io.BytesIO(TEXT_EXPORT.read_bytes()))
    assert from_json["valid"] and from_json["records"] == 9 and from_json["running"] == 1
    assert from_json["card_hours"] == pytest.approx(
        (H100_CARD_S + A100_CARD_S + SLICE_CARD_S) / HOUR_S
    )
    assert from_json["as_of"] == AS_OF.isoformat()
    for key in ("records", "card_hours", "first_start", "last_end", "cards", "teams", "skipped"):
        assert from_json[key] == from_text[key], key
    refused = preview_usage(job, io.BytesIO(AUTH_ERROR.read_bytes()))
    assert refused["valid"] is False and "Protocol authentication error" in refused["issues"][0]

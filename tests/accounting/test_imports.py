"""The import service: real-shaped Slurm text in, upserted records out, all-or-nothing."""

from __future__ import annotations

import datetime as dt
import io

import pytest
from django.core.management import CommandError, call_command

from accounting import services
from accounting.models import (
    GresAlias,
    ImportJob,
    PartitionMapping,
    SreportUtilization,
    UsageRecord,
)
from accounting.parsing import UsageValidationError
from core.jobs.status import JobStatus
from inventory.models import AcceleratorModel, NodeGroup, Pool
from tests.support.alpha_usage import (
    CSV_TEXT,
    H100_8,
    SACCT_LINES,
    SREPORT_TEXT,
    sacct_text,
)

pytestmark = pytest.mark.django_db


def stored_rows() -> list[dict]:
    return list(UsageRecord.objects.order_by("record_key").values())


def test_sacct_import_stores_one_record_per_gpu_job(alpha, import_text):
    _, counts = import_text(alpha, sacct_text())
    assert (counts.records_created, counts.records_updated, counts.records_unchanged) == (3, 0, 0)
    assert counts.records_skipped == 2  # the pending job and the CPU-only job
    assert counts.lines_read == 8
    records = {r.job_id: r for r in UsageRecord.objects.select_related("pool", "accelerator")}
    assert set(records) == {"1001", "1002", "1003"}
    first = records["1001"]
    assert first.record_key == "1001@2024-03-01T09:55:00"
    assert (first.cards, first.duration_h, first.card_hours) == (8.0, 6.0, 48.0)
    assert first.account == "team-a" and first.user == "ann" and first.partition == "h100"
    assert first.accelerator.name == "H100 SXM5 80GB" and first.gres_type == "h100"
    assert first.pool.name == "h100"  # the pool named like the partition
    assert first.gpu_utilization == pytest.approx(0.85)  # gpuutil 680 over 8 cards
    assert first.state == "completed" and first.end is not None
    assert records["1003"].state == "node_fail" and records["1003"].card_hours == 16.0


def test_reimporting_the_same_file_changes_nothing(alpha, import_text):
    import_text(alpha, sacct_text())
    before = stored_rows()
    _, counts = import_text(alpha, sacct_text())
    assert (counts.records_created, counts.records_updated, counts.records_unchanged) == (0, 0, 3)
    assert stored_rows() == before  # same rows, same values, even the import that wrote them


def test_a_changed_line_updates_only_its_record(alpha, import_text):
    import_text(alpha, sacct_text())
    lines = list(SACCT_LINES)
    lines[3] = lines[3].replace("|team-b|", "|team-z|")  # job 1002 moves to another account
    job, counts = import_text(alpha, sacct_text(lines))
    assert (counts.records_created, counts.records_updated, counts.records_unchanged) == (0, 1, 2)
    changed = UsageRecord.objects.get(job_id="1002")
    assert changed.account == "team-z" and changed.import_job_id == job.pk
    assert UsageRecord.objects.count() == 3


def test_bad_lines_are_reported_by_line_and_column_and_nothing_is_stored(alpha, import_text):
    import_text(alpha, sacct_text())
    before = stored_rows()
    lines = list(SACCT_LINES)
    lines[3] = lines[3].replace("|team-b|", "|team-new|")  # a good change that must not land
    lines[4] = lines[4].replace("NODE_FAIL", "EXPLODED")  # file line 6
    lines.append("1099|1099|alpha|h100|team-a|ann|2024-03-01T09:00:00")  # line 9: too short
    with pytest.raises(UsageValidationError) as caught:
        import_text(alpha, sacct_text(lines))
    messages = [str(issue) for issue in caught.value.issues]
    assert "line 6, column State: unknown state 'EXPLODED'" in messages
    assert any(m.startswith("line 9, column ") and "missing field" in m for m in messages)
    assert stored_rows() == before


def test_a_bad_line_after_chunks_were_written_rolls_everything_back(
    alpha, import_text, monkeypatch
):
    monkeypatch.setattr(services, "CHUNK_LINES", 3)  # many chunks, written one by one
    lines = [
        f"{2000 + n}|{2000 + n}|alpha|h100|team-a|ann|2024-03-01T00:00:00|2024-03-01T01:00:00|"
        f"2024-03-01T02:00:00|01:00:00|COMPLETED|1|{H100_8}|gpu001|"
        for n in range(30)
    ]
    lines[27] = lines[27].replace("2024-03-01T01:00:00", "2024-13-01T01:00:00")  # line 29
    with pytest.raises(UsageValidationError) as caught:
        import_text(alpha, sacct_text(lines))
    assert [str(i) for i in caught.value.issues] == [
        "line 29, column Start: '2024-13-01T01:00:00' is not a date-time"
    ]
    assert UsageRecord.objects.count() == 0


def test_a_file_of_two_scheduler_clusters_is_rejected(alpha, import_text):
    lines = list(SACCT_LINES)
    lines[4] = lines[4].replace("|alpha|", "|beta|")
    with pytest.raises(UsageValidationError) as caught:
        import_text(alpha, sacct_text(lines))
    assert str(caught.value.issues[0]).startswith("line 6, column Cluster: the file mixes")
    assert UsageRecord.objects.count() == 0


def test_values_longer_than_the_columns_are_rejected(alpha, import_text):
    lines = list(SACCT_LINES)
    lines[3] = lines[3].replace("|team-b|", "|" + "x" * 150 + "|")
    with pytest.raises(UsageValidationError) as caught:
        import_text(alpha, sacct_text(lines))
    assert [str(i) for i in caught.value.issues] == [
        "line 5, column Account: longer than 100 characters"
    ]


def test_alias_rows_override_the_defaults_and_unknown_types_warn(alpha, import_text):
    pcie = AcceleratorModel.objects.get(name="H100 PCIe 80GB")
    GresAlias.objects.create(gres_type="H100", accelerator=pcie)  # stored normalized
    assert GresAlias.objects.get().gres_type == "h100"
    mystery = H100_8.replace("gres/gpu:h100=8", "gres/gpu:mystery=8")
    lines = [
        *SACCT_LINES[:4],
        "1010|1010|alpha|h100|team-a|ann|2024-03-01T09:00:00|2024-03-01T10:00:00|"
        f"2024-03-01T11:00:00|01:00:00|COMPLETED|1|{mystery}|gpu001|",
    ]
    _, counts = import_text(alpha, sacct_text(lines))
    assert UsageRecord.objects.get(job_id="1001").accelerator == pcie
    unknown = UsageRecord.objects.get(job_id="1010")
    assert unknown.accelerator is None and unknown.gres_type == "mystery"
    assert unknown.pool.name == "h100"  # still placed by its partition
    assert any("mystery" in warning for warning in counts.warnings)


def test_partition_mappings_place_records_in_pools(alpha, import_text):
    other = Pool.objects.create(cluster=alpha, name="other")
    PartitionMapping.objects.create(cluster=alpha, partition="h100", pool=other)
    import_text(alpha, sacct_text())
    assert set(UsageRecord.objects.values_list("pool__name", flat=True)) == {"other"}


def test_mig_slices_count_as_their_share_of_a_card(alpha, import_text):
    # The slices' card must be in the cluster: names resolve against its node groups first.
    NodeGroup.objects.create(
        pool=alpha.pools.get(),
        name="a100-mig",
        accelerator=AcceleratorModel.objects.get(name="A100 SXM4 80GB"),
        node_count=1,
        cards_per_node=8,
    )
    mig = "cpu=8,gres/gpu:a100_3g.40gb=1,gres/gpu=1,node=1"
    lines = [
        "3001_4|3010|alpha|mig|team-b|bob|2024-03-01T09:00:00|2024-03-01T10:00:00|"
        f"2024-03-01T17:00:00|07:00:00|COMPLETED|1|{mig}|gpu100|"
    ]
    import_text(alpha, sacct_text(lines))
    record = UsageRecord.objects.select_related("accelerator").get()
    assert record.cards == pytest.approx(3 / 7) and record.card_hours == pytest.approx(3.0)
    assert record.mig_profile == "3g.40gb" and record.accelerator.name == "A100 SXM4 80GB"
    assert (record.job_id, record.job_label, record.parent_job_id) == ("3010", "3001_4", "3001")


def test_sreport_rows_upsert_and_overlapping_periods_are_rejected(alpha, import_text):
    _, counts = import_text(alpha, SREPORT_TEXT, kind="sreport")
    assert counts.records_created == 1
    row = SreportUtilization.objects.get()
    assert (row.down_card_hours, row.planned_down_card_hours, row.reported_card_hours) == (
        24.0,
        48.0,
        384.0,
    )
    assert row.period_end - row.period_start == dt.timedelta(days=1)
    _, counts = import_text(alpha, SREPORT_TEXT, kind="sreport")
    assert (counts.records_created, counts.records_unchanged) == (0, 1)
    overlapping = SREPORT_TEXT.replace("2024-03-01T00:00:00", "2024-02-29T12:00:00")
    with pytest.raises(UsageValidationError) as caught:
        import_text(alpha, overlapping, kind="sreport")
    assert "line 6, column Cluster: the period overlaps" in str(caught.value.issues[0])
    assert SreportUtilization.objects.count() == 1


def test_csv_and_xlsx_imports(alpha, import_text, tmp_path):
    _, counts = import_text(alpha, CSV_TEXT, kind="csv")
    assert counts.records_created == 2
    record = UsageRecord.objects.get(job_id="j-1")
    assert record.mfu == pytest.approx(0.45) and record.account == "team-a"
    assert record.accelerator.name == "H100 SXM5 80GB" and record.pool.name == "h100"

    from openpyxl import Workbook

    workbook = Workbook()
    sheet = workbook.active
    for line in CSV_TEXT.splitlines():
        sheet.append(line.replace("j-", "x-").split(","))
    path = tmp_path / "usage.xlsx"
    workbook.save(path)
    _, counts = import_text(alpha, io.BytesIO(path.read_bytes()), kind="xlsx")
    assert counts.records_created == 2
    assert UsageRecord.objects.filter(job_id__startswith="x-").count() == 2


def test_import_usage_command(alpha, tmp_path, capsys):
    path = tmp_path / "sacct.txt"
    path.write_text(sacct_text())
    call_command("import_usage", str(path), "--kind", "sacct", "--cluster", "alpha")
    assert UsageRecord.objects.count() == 3
    job = ImportJob.objects.get()
    assert job.status == JobStatus.SUCCEEDED and job.progress == 100
    assert job.records_created == 3 and job.source_name == "sacct.txt"

    path.write_text(sacct_text([SACCT_LINES[0].replace("COMPLETED", "EXPLODED")]))
    with pytest.raises(CommandError, match="line 2, column State"):
        call_command("import_usage", str(path), "--kind", "sacct", "--cluster", "Test DC/alpha")
    failed = ImportJob.objects.latest("pk")
    assert failed.status == JobStatus.FAILED
    assert failed.issues == ["line 2, column State: unknown state 'EXPLODED'"]
    with pytest.raises(CommandError, match="No cluster named"):
        call_command("import_usage", str(path), "--kind", "sacct", "--cluster", "nope")


def test_a_csv_must_name_the_cluster_it_is_imported_into(alpha, import_text):
    with pytest.raises(UsageValidationError) as caught:
        import_text(alpha, CSV_TEXT.replace("alpha,j-2", "beta,j-2"), kind="csv")
    assert [str(i) for i in caught.value.issues] == [
        "line 3, column cluster: 'beta' is not the cluster being imported into ('alpha')"
    ]
    assert UsageRecord.objects.count() == 0


def test_gres_names_resolve_against_the_clusters_cards_first(alpha, import_text):
    """``a100`` means the A100 this cluster has; with two variants or none it is not guessed."""
    pool = alpha.pools.get()
    a100_80 = NodeGroup.objects.create(
        pool=pool,
        name="a100-80",
        accelerator=AcceleratorModel.objects.get(name="A100 SXM4 80GB"),
        node_count=1,
        cards_per_node=8,
    )
    line = (
        "4001|4001|alpha|a100|team-a|ann|2024-03-01T09:00:00|2024-03-01T10:00:00|"
        "2024-03-01T12:00:00|02:00:00|COMPLETED|1|cpu=8,gres/gpu:a100=8,gres/gpu=8,node=1|g1|"
    )
    import_text(alpha, sacct_text([line]))
    record = UsageRecord.objects.select_related("accelerator").get()
    assert record.accelerator.name == "A100 SXM4 80GB" and record.card_hours == 16.0
    NodeGroup.objects.create(
        pool=pool,
        name="a100-40",
        accelerator=AcceleratorModel.objects.get(name="A100 SXM4 40GB"),
        node_count=1,
        cards_per_node=8,
    )
    _, counts = import_text(alpha, sacct_text([line.replace("4001|4001", "4002|4002")]))
    assert UsageRecord.objects.get(job_id="4002").accelerator is None
    assert any("a100" in warning for warning in counts.warnings)
    a100_80.delete()
    GresAlias.objects.create(
        gres_type="a100", accelerator=AcceleratorModel.objects.get(name="A100 SXM4 40GB")
    )
    import_text(alpha, sacct_text([line.replace("4001|4001", "4003|4003")]))
    assert UsageRecord.objects.get(job_id="4003").accelerator.name == "A100 SXM4 40GB"

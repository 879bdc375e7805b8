"""A real Slurm's sacct exports through the import service into the database (both
backends), checked against the jobs' own figures (tests/support/slurm.py). sreport's are in
test_sreport_import.py."""

from __future__ import annotations

import time

import pytest

from accounting.models import UsageRecord
from accounting.parsing import DEFAULT_SACCT_COLUMNS
from tests.support.builders import import_usage_text
from tests.support.slurm import (
    card_seconds_range,
    inventory_of_the_test_cluster,
    sacct_export,
)

pytestmark = pytest.mark.django_db
DEFAULT = ",".join(DEFAULT_SACCT_COLUMNS)


def stored_by_label(cluster) -> dict[str, UsageRecord]:
    records = UsageRecord.objects.filter(cluster=cluster).select_related("accelerator")
    labels = [record.job_label for record in records]
    assert len(labels) == len(set(labels)), "one record per job, task and component"
    return {record.job_label: record for record in records}


def test_an_export_with_every_kind_of_job_is_stored_as_the_jobs_ran(slurm_workload):
    cluster = inventory_of_the_test_cluster()
    job, counts = import_usage_text(cluster, sacct_export(slurm_workload, "-P", "-o", DEFAULT))
    assert job.as_of_source == "file"
    stored = stored_by_label(cluster)
    assert set(stored) == set(slurm_workload.by_label())
    for label, submitted in slurm_workload.by_label().items():
        record = stored[label]
        assert record.state == submitted.state, label
        assert record.account == submitted.account, label
        model = "H100 SXM5 80GB" if "h100" in submitted.gpus else "A100 SXM4 40GB"
        assert record.accelerator.name == model, label
        if submitted.state == "running":
            held_s = (job.as_of - record.start).total_seconds()
            assert record.card_hours * 3600 == pytest.approx(held_s, abs=1e-3)
            continue
        low, high = card_seconds_range(submitted)
        assert low - 1e-3 <= record.card_hours * 3600 <= high + 1e-3, label


def test_the_same_export_imported_again_changes_nothing(slurm_workload):
    cluster = inventory_of_the_test_cluster()
    text = sacct_export(slurm_workload, "-P", "-o", DEFAULT)
    import_usage_text(cluster, text)
    before = {label: r.card_hours for label, r in stored_by_label(cluster).items()}
    _, counts = import_usage_text(cluster, text)
    assert counts.records_created == 0
    assert counts.records_unchanged == len(before)
    assert {label: r.card_hours for label, r in stored_by_label(cluster).items()} == before


def test_a_later_export_moves_the_running_job_on_without_a_second_record(slurm_workload):
    """The running job's record is replaced by the next export's, not added to."""
    cluster = inventory_of_the_test_cluster()
    first, _ = import_usage_text(cluster, sacct_export(slurm_workload, "-P", "-o", DEFAULT))
    running = slurm_workload.running_job_id
    held_first = stored_by_label(cluster)[running].card_hours
    time.sleep(1.1)  # a later export: the running job's Elapsed has grown (1 s resolution)
    second, _ = import_usage_text(cluster, sacct_export(slurm_workload, "-P", "-o", DEFAULT))
    records = UsageRecord.objects.filter(cluster=cluster, job_label=running)
    assert records.count() == 1
    assert second.as_of >= first.as_of
    assert records.get().card_hours >= held_first

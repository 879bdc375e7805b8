"""``promtool tsdb dump`` (labels first, the name as ``__name__``, milliseconds) as an upload:
a real promtool's dump of the suite's DCGM history gives the samples the OpenMetrics text of
the same history gives, and the upload is accepted as a time series."""

from __future__ import annotations

import io
import shutil
import subprocess

import pandas as pd
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from telemetry import export_text
from telemetry.export_text import read_export
from telemetry.models import TelemetryFetch
from telemetry.upload_kind import upload_kind_problem
from tests.support.prometheus import PROMTOOL, needs_prometheus

pytestmark = needs_prometheus


def ordered(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame.astype(dict.fromkeys(export_text.COLUMNS, str))
    return frame.sort_values(["metric", "Hostname", "gpu", "t"]).reset_index(drop=True)


@pytest.fixture(scope="module")
def dump(dcgm_history, tmp_path_factory) -> bytes:
    """`promtool tsdb dump --match='{__name__=~"DCGM_FI_.*"}' <data dir>` of the history."""
    folder = tmp_path_factory.mktemp("dump") / "tsdb"
    shutil.copytree(dcgm_history / "tsdb", folder)
    (folder / "wal").mkdir(exist_ok=True)  # a server's data folder has one; promtool opens it
    done = subprocess.run(
        [str(PROMTOOL), "tsdb", "dump", '--match={__name__=~"DCGM_FI_.*"}', str(folder)],
        check=True, capture_output=True,
    )  # fmt: skip
    return done.stdout


def test_the_dump_gives_the_samples_of_the_openmetrics_export(dump, dcgm_history):
    assert dump.startswith(b"{DCGM_FI_DRIVER_VERSION=")  # labels first, sorted; no name before
    with (dcgm_history / "dcgm.om").open("rb") as handle:
        expected = ordered(read_export(handle))
    pd.testing.assert_frame_equal(ordered(read_export(io.BytesIO(dump))), expected)


def test_a_dump_cut_into_blocks_anywhere_reads_the_same(monkeypatch, dump):
    part = dump[: len(dump) // 7].rsplit(b"\n", 1)[0] + b"\n"
    whole = ordered(read_export(io.BytesIO(part)))
    monkeypatch.setattr(export_text, "BLOCK_BYTES", 7919)  # a prime: edges fall anywhere
    pd.testing.assert_frame_equal(ordered(read_export(io.BytesIO(part))), whole)


@pytest.mark.django_db
def test_a_dump_is_accepted_at_upload(dump, client_for, planner, gpu_cluster):
    head = dump[:200_000].rsplit(b"\n", 1)[0] + b"\n"
    assert upload_kind_problem(SimpleUploadedFile("dcgm.txt", head)) is None
    answer = client_for(planner).post(
        "/api/v1/telemetry/fetches/",
        {
            "cluster": gpu_cluster.pk,
            "start": "2026-03-02",
            "end": "2026-03-03",
            "file": SimpleUploadedFile("dcgm.txt", head, content_type="text/plain"),
        },
        format="multipart",
    )
    assert answer.status_code == 201, answer.content
    assert TelemetryFetch.objects.count() == 1

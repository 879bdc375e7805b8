"""Prometheus /api/v1/query_range JSON as an upload (telemetry.export_json): what a real
Prometheus answers for the suite's DCGM history gives the samples, and the rollups, that the
OpenMetrics text of the same history gives; answers that hold no period (an error, an instant
query's vector, a scalar, a string) are refused at upload naming the query to run instead."""

from __future__ import annotations

import datetime as dt
import io
import json

import numpy as np
import pandas as pd
import pytest
import requests
from django.core.files.uploadedfile import SimpleUploadedFile

from telemetry import export_text, promql
from telemetry.export_json import answers_problem, read_json_export
from telemetry.export_text import ExportError, read_export
from tests.support import dcgm
from tests.support.dcgm import JOB_DAYS, assert_gpu_days, assert_job_days
from tests.support.prometheus import needs_prometheus

END_S = dcgm.START_S + (dcgm.SAMPLES - 1) * dcgm.STEP_S  # the history's last sample (day 2 24:00)
MIDDLE_S = dcgm.START_S + 1440 * dcgm.STEP_S  # day 1 24:00


def rfc3339(epoch_s: int) -> str:
    return dt.datetime.fromtimestamp(epoch_s, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def query_range(url: str, query: str, start_s: int, end_s: int, step_s: int = 60) -> bytes:
    """What `curl -sG <url>/api/v1/query_range --data-urlencode ...` saves: the body as is."""
    params = {"query": query, "start": rfc3339(start_s), "end": rfc3339(end_s), "step": step_s}
    return requests.get(f"{url}/api/v1/query_range", params=params, timeout=60).content


def per_field(url: str, start_s: int = dcgm.START_S, end_s: int = END_S) -> list[bytes]:
    """One answer per DCGM field Fleetwise reads, as a loop of curl calls gives them."""
    return [query_range(url, field, start_s, end_s) for field in promql.FIELDS]


def ordered(frame: pd.DataFrame) -> pd.DataFrame:
    columns = list(frame.columns)
    frame = frame.astype(dict.fromkeys(export_text.COLUMNS, str))
    return frame.sort_values(["metric", "Hostname", "gpu", "t"])[columns].reset_index(drop=True)


@pytest.fixture(scope="module")
def text_samples(dcgm_history) -> pd.DataFrame:
    with (dcgm_history / "dcgm.om").open("rb") as handle:
        return ordered(read_export(handle))


@pytest.fixture(scope="module")
def answers(prometheus) -> list[bytes]:
    return per_field(prometheus.url)


def pretty(answer: bytes) -> bytes:
    """The answer as `jq .` prints it (indented, one value a line)."""
    return json.dumps(json.loads(answer), indent=2).encode()


@needs_prometheus
@pytest.mark.parametrize(
    "layout",
    ["concatenated", "one a line, indented", "array of the two days' answers"],
)
def test_query_range_answers_give_the_samples_of_the_openmetrics_export(
    prometheus, answers, text_samples, layout
):
    if layout == "concatenated":  # curl ... >> file: no newline between answers
        data = b"".join(answers)
    elif layout == "one a line, indented":
        data = b"\n".join(pretty(answer) for answer in answers) + b"\n"
    else:  # two queries a field, day 1 and day 2, sharing the point at day 1 24:00
        days = per_field(prometheus.url, dcgm.START_S, MIDDLE_S)
        days += per_field(prometheus.url, MIDDLE_S, END_S)
        data = b"[" + b",\n".join(days) + b"]"
    samples = ordered(read_json_export(io.BytesIO(data)))
    assert len(samples) == 7 * 8 * dcgm.SAMPLES  # 7 fields exported (no SM_ACTIVE), 8 GPUs
    pd.testing.assert_frame_equal(samples, text_samples)


@needs_prometheus
def test_a_file_cut_into_blocks_anywhere_reads_the_same(monkeypatch, answers, text_samples):
    data = b"\n".join(pretty(answer) for answer in answers[:2])
    whole = ordered(read_json_export(io.BytesIO(data)))
    monkeypatch.setattr(export_text, "BLOCK_BYTES", 7919)  # a prime: edges fall anywhere
    assert answers_problem(io.BytesIO(data)) is None
    pd.testing.assert_frame_equal(ordered(read_json_export(io.BytesIO(data))), whole)
    fields = {promql.FIELDS[0], promql.FIELDS[1]}
    expected = text_samples[text_samples["metric"].isin(fields)].reset_index(drop=True)
    pd.testing.assert_frame_equal(whole, expected)


@needs_prometheus
@pytest.mark.django_db
def test_an_uploaded_query_range_file_gives_the_rollups_of_the_history(
    client_for, planner, gpu_cluster, prometheus
):
    from telemetry import services
    from telemetry.models import TelemetryFetch

    days = per_field(prometheus.url, dcgm.START_S, MIDDLE_S)
    days += per_field(prometheus.url, MIDDLE_S, END_S)
    upload = SimpleUploadedFile("dcgm.json", b"[" + b",".join(days) + b"]")
    answer = client_for(planner).post(
        "/api/v1/telemetry/fetches/",
        {"cluster": gpu_cluster.pk, "start": "2026-03-02", "end": "2026-03-03", "file": upload},
        format="multipart",
    )
    assert answer.status_code == 201, answer.content
    fetch = TelemetryFetch.objects.get()
    services.run_fetch(fetch.pk, str(fetch.run_id))
    fetch.refresh_from_db()
    assert fetch.status == "succeeded", fetch.error
    assert fetch.job_days == len(JOB_DAYS)
    # The figures worked out by hand in tests/support/dcgm.py, as for the text export.
    assert_gpu_days(gpu_cluster, energy_rel=1e-9)
    assert_job_days(gpu_cluster)


def post(client, cluster, data: bytes):
    upload = SimpleUploadedFile("prometheus.json", data, content_type="application/json")
    return client.post(
        "/api/v1/telemetry/fetches/",
        {"cluster": cluster.pk, "start": "2026-03-02", "end": "2026-03-03", "file": upload},
        format="multipart",
    )


def prometheus_answer(url: str, case: str) -> bytes:
    """A real Prometheus's answer for each file that holds no period."""
    power = promql.POWER
    if case == "vector":  # /api/v1/query: one instant
        params = {"query": power, "time": str(MIDDLE_S)}
        return requests.get(f"{url}/api/v1/query", params=params, timeout=30).content
    if case in ("scalar", "string"):
        query = "1" if case == "scalar" else '"a"'
        return requests.get(f"{url}/api/v1/query", params={"query": query}, timeout=30).content
    if case == "error":  # more than 11,000 points a series
        return query_range(url, power, dcgm.START_S, END_S, step_s=1)
    if case == "expression":
        return query_range(url, f"avg_over_time({power}[5m])", dcgm.START_S, END_S)
    raise AssertionError(case)


@needs_prometheus
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("case", "says"),
    [
        ("vector", 'instant query\'s answer (/api/v1/query, resultType "vector")'),
        ("scalar", 'resultType "scalar": one value without series'),
        ("string", 'resultType "string": one value without series'),
        ("error", 'Prometheus error answer (status "error", errorType bad_data)'),
        ("expression", "has no metric name (__name__)"),
    ],
)
def test_answers_without_a_period_are_refused_at_upload_naming_query_range(
    client_for, planner, gpu_cluster, prometheus, case, says
):
    from telemetry.models import TelemetryFetch

    answer = post(client_for(planner), gpu_cluster, prometheus_answer(prometheus.url, case))
    assert answer.status_code == 400, answer.content
    message = answer.json()["file"][0]
    assert says in message
    assert "/api/v1/query_range" in message and "--data-urlencode" in message
    assert not TelemetryFetch.objects.exists()


@needs_prometheus
@pytest.mark.django_db
def test_an_instant_answer_after_range_answers_is_refused_too(
    client_for, planner, gpu_cluster, prometheus, answers
):
    data = b"\n".join([*answers[:3], prometheus_answer(prometheus.url, "vector")])
    answer = post(client_for(planner), gpu_cluster, data)
    assert answer.status_code == 400
    assert answer.json()["file"][0].startswith("Answer 4 of the file: This is an instant query")


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b'{"meta": {"plugin": {}}, "errors": [], "jobs": []}', "Slurm job accounting"),
        (b'{"name": "not prometheus"}', 'not a Prometheus HTTP API answer (no "status"'),
        (
            b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__n',
            "Not JSON near byte",
        ),
        (
            b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":'
            b'{"__name__":"DCGM_FI_DEV_POWER_USAGE","gpu":"0"},"values":[[1772409660,"1"]]}]}}',
            "a DCGM sample needs the Hostname and gpu labels",
        ),
        (
            b'{"status":"success","data":{"resultType":"matrix","result":[{"metric":'
            b'{"__name__":"up"},"values":[[1772409660,"1"]]}]}}',
            "hold no DCGM_FI_* series",
        ),
    ],
)
def test_json_that_is_not_dcgm_query_range_answers_is_refused_at_upload(
    client_for, planner, gpu_cluster, data, says
):
    answer = post(client_for(planner), gpu_cluster, data)
    assert answer.status_code == 400, answer.content
    assert says in answer.json()["file"][0]


def matrix(values: list[list], name: str = promql.POWER, host: str = "gpu-h01") -> bytes:
    series = {"metric": {"__name__": name, "Hostname": host, "gpu": "0"}, "values": values}
    answer = {"status": "success", "data": {"resultType": "matrix", "result": [series]}}
    return json.dumps(answer).encode()


def test_nan_and_infinities_are_read_as_the_text_export_reads_them():
    t = dcgm.START_S
    texts = ["300", "NaN", "+Inf", "-Inf", "1e-07"]
    data = matrix([[t + 60 * k, text] for k, text in enumerate(texts)])
    text = "".join(
        f'{promql.POWER}{{gpu="0",Hostname="gpu-h01"}} {v} {t + 60 * k}\n'
        for k, v in enumerate(texts)
    )
    from_json = read_json_export(io.BytesIO(data))
    from_text = read_export(io.BytesIO((text + "# EOF\n").encode()))
    np.testing.assert_array_equal(from_json["value"], [300.0, np.nan, np.inf, -np.inf, 1e-07])
    pd.testing.assert_frame_equal(ordered(from_json), ordered(from_text))


@pytest.mark.parametrize(
    ("values", "says"),
    [
        ([[1772409660, "watts"]], "'watts' is not a number"),
        ([[1772409660, 300]], 'are not [time, "value"] pairs'),
        ([[1772409660, "1", "2"]], 'are not [time, "value"] pairs'),
        ([["soon", "1"]], 'are not [time, "value"] pairs'),
    ],
)
def test_values_that_are_not_numbered_pairs_fail_the_file(values, says):
    data = matrix(values)
    at = data.index(b'"values": [') + len(b'"values": ')  # where the values array starts
    with pytest.raises(ExportError) as error:
        read_json_export(io.BytesIO(data))
    assert f"The series' values at byte {at}" in str(error.value)
    assert says in str(error.value)


def test_samples_series_and_size_are_bounded(monkeypatch):
    t = dcgm.START_S
    two_gpus = matrix([[t, "1"], [t + 60, "2"]]) + matrix([[t, "1"]], host="gpu-h02")
    monkeypatch.setattr(export_text, "MAX_UPLOAD_SAMPLES", 2)
    assert "More than 2 samples in the answers" in answers_problem(io.BytesIO(two_gpus))
    with pytest.raises(ExportError, match="More than 2 samples in the answers"):
        read_json_export(io.BytesIO(two_gpus))
    monkeypatch.setattr(export_text, "MAX_UPLOAD_SAMPLES", 100)
    monkeypatch.setattr(export_text, "MAX_UPLOAD_SERIES", 1)
    assert "More than 1 series in the answers" in answers_problem(io.BytesIO(two_gpus))
    with pytest.raises(ExportError, match="More than 1 series"):
        read_json_export(io.BytesIO(two_gpus))
    monkeypatch.setattr(export_text, "MAX_UPLOAD_BYTES", 100_000)
    monkeypatch.setattr(export_text, "BLOCK_BYTES", 10_000)
    big = matrix([[t + 60 * k, "1"] for k in range(10_000)])
    assert len(big) > 150_000
    with pytest.raises(ExportError, match="larger than"):
        read_json_export(io.BytesIO(big))


def test_a_point_given_by_two_answers_counts_once():
    t = dcgm.START_S
    data = matrix([[t, "1"], [t + 60, "2"]]) + b"\n" + matrix([[t + 60, "2"], [t + 120, "3"]])
    samples = read_json_export(io.BytesIO(data))
    assert sorted(samples["t"] - t) == [0, 60, 120]
    assert sorted(samples["value"]) == [1.0, 2.0, 3.0]


# A child reads JSON_MIB of query_range answers made as they are read (never in memory as a
# file) under an address-space cap: json.loads of the file would need ~10 times the file;
# reading it in blocks, a series' values at a time, needs the samples and one block.
JSON_MIB, JSON_CAP_MIB = 64, 448
BOUNDED_JSON = """
import io
from telemetry.export_json import read_json_export

FIELDS = ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "DCGM_FI_DEV_POWER_USAGE")
SERIES = ('{{"metric":{{"Hostname":"gpu{h:04d}","UUID":"GPU-{h}-{g}","__name__":"{m}",'
          '"gpu":"{g}","modelName":"NVIDIA H100 80GB HBM3"}},"values":[{v}]}}')
POINTS = ",".join('[%d,"312.5"]' % (1772409660 + 60 * k) for k in range(1440))


class Answers(io.RawIOBase):
    def __init__(self, total):
        self.total, self.given, self.pending, self.k = total, 0, b"", 0

    def readable(self):
        return True

    def readinto(self, buffer):
        while len(self.pending) < len(buffer) and self.given < self.total:
            items = ",".join(
                SERIES.format(h=self.k * 10 + n // 8, g=n % 8, m=FIELDS[self.k % 2], v=POINTS)
                for n in range(80)
            )
            block = ('{"status":"success","data":{"resultType":"matrix","result":[%s]}}\\n'
                     % items).encode()
            self.k, self.given, self.pending = self.k + 1, self.given + len(block), (
                self.pending + block
            )
        n = min(len(buffer), len(self.pending))
        buffer[:n], self.pending = self.pending[:n], self.pending[n:]
        return n


frame = read_json_export(io.BufferedReader(Answers(JSON_MIB * 2**20)))
print(len(frame), frame["value"].sum())
"""


def test_a_large_json_file_is_read_in_bounded_memory():
    from tests.support.memcap import run_capped

    code = BOUNDED_JSON.replace("JSON_MIB", str(JSON_MIB))
    result = run_capped(code, cap_bytes=JSON_CAP_MIB * 2**20, timeout_s=240)
    assert result.returncode == 0, result.stderr[-2000:]
    samples, total = result.stdout.split()
    assert int(samples) > 3_000_000  # ~20 bytes a point
    assert float(total) == pytest.approx(312.5 * int(samples))

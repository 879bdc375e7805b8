"""An analysis export names a serving pool's money by what it serves (issue 31): cost per
million tokens, never the training figure cost per effective PFLOP-day.

Worked by hand: the report fleet's cluster "alpha" with an inference pool of 8 H100 serving a
load of 1,000 tokens/s over the whole of March 2024 (2024-03-01 to 2024-03-31, 720 h): it
serves 1,000 × 3,600 × 720 = 2,592 million tokens, so its cost per million tokens is its
total cost ÷ 2,592.
"""

from __future__ import annotations

import csv
import datetime as dt
import io

import pytest

from accounting.models import ServingLoad
from planner import services
from tests.support.builders import add_h100_pool
from tests.support.inline import run_analysis_inline

pytestmark = pytest.mark.django_db

START = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
END = dt.datetime(2024, 3, 31, tzinfo=dt.UTC)
MILLION_TOKENS_SERVED = 2_592.0
LOAD = {
    "model_params": 8e9,
    "weight_precision": "bf16",
    "kv_precision": "bf16",
    "input_tokens": 1000,
    "output_tokens": 300,
}


def _analysis(alpha, django_capture_on_commit_callbacks, served_tokens_per_s: float | None):
    pool = add_h100_pool(alpha, "serving", purpose="inference")
    if served_tokens_per_s is not None:
        ServingLoad.objects.create(
            pool=pool,
            period_start=START,
            period_end=END,
            served_tokens_per_s=served_tokens_per_s,
            **LOAD,
        )
    with django_capture_on_commit_callbacks(execute=False):
        analysis = services.start_analysis(scope="fleet", period_start=START, period_end=END)
    return run_analysis_inline(analysis)


def _csv_rows(client, analysis) -> tuple[list[str], dict[str, dict[str, str]]]:
    response = client.get(f"/api/v1/analyses/{analysis.pk}/rows/", {"format": "csv"})
    assert response.status_code == 200
    reader = csv.DictReader(io.StringIO(response.content.decode("utf-8-sig")))
    rows = {row["pool"]: row for row in reader}
    return list(reader.fieldnames or []), rows


def test_a_serving_row_exports_cost_per_million_tokens_not_the_training_name(
    alpha, django_capture_on_commit_callbacks, client, viewer
):
    analysis = _analysis(alpha, django_capture_on_commit_callbacks, 1000.0)
    stored = {row["pool"]: row for row in analysis.results["pools"]}
    serving = stored["serving"]
    assert serving["total_cost"] > 0
    assert serving["cost_per_million_tokens"] == pytest.approx(
        serving["total_cost"] / MILLION_TOKENS_SERVED
    )
    assert serving["cost_per_effective_pflop_day"] is None
    assert serving["cost_per_million_tokens_reason"] is None
    training = stored["h100"]
    assert training["cost_per_effective_pflop_day"] > 0
    assert training["cost_per_million_tokens"] is None

    client.force_login(viewer)
    header, rows = _csv_rows(client, analysis)
    assert "cost_per_million_tokens" in header and "cost_per_effective_pflop_day" in header
    assert float(rows["serving"]["cost_per_million_tokens"]) == pytest.approx(
        serving["total_cost"] / MILLION_TOKENS_SERVED
    )
    assert rows["serving"]["cost_per_effective_pflop_day"] == ""  # not a serving figure
    assert rows["h100"]["cost_per_million_tokens"] == ""
    assert rows["h100"]["cost_per_million_tokens_reason"].startswith("training pool")


def test_without_a_measured_load_the_serving_cost_is_null_with_its_reason(
    alpha, django_capture_on_commit_callbacks
):
    analysis = _analysis(alpha, django_capture_on_commit_callbacks, None)
    serving = {row["pool"]: row for row in analysis.results["pools"]}["serving"]
    assert serving["cost_per_million_tokens"] is None
    assert serving["cost_per_effective_pflop_day"] is None
    assert serving["cost_per_million_tokens_reason"] == (
        "no measured serving load: no serving load entered for this period"
    )

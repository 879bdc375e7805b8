"""A fleet with something in every list: demo inventory, the 16-card "alpha" cluster with
usage and sreport rows, a gres alias, a partition mapping, a finished analysis and plan;
helpers that read CSV/XLSX back and compare them with the JSON rows."""

from __future__ import annotations

import datetime as dt
import io
import json
import math
from types import SimpleNamespace

import openpyxl
import pandas as pd
import pytest

from tests.accounting.conftest import SREPORT_TEXT, alpha, import_text, sacct_text  # noqa: F401

REPORT_QUERY = "start=2024-03-01&end=2024-03-02&granularity=day"


def finished_analysis(scope: str = "fleet", object_id: int | None = None):
    """Run an analysis's parts and summary in this process (no broker)."""
    from django.db import transaction

    from planner import analysis as engine_bridge
    from planner import services
    from planner.models import Analysis

    with transaction.atomic():
        created = services.start_analysis(scope=scope, object_id=object_id)
    run_id = str(created.run_id)
    clusters = services.clusters_in_scope(scope, object_id)
    services.mark_running(created.pk, run_id, len(clusters))
    parts = []
    for cluster_id in clusters:
        rows, inputs = engine_bridge.evaluate_cluster(created, cluster_id)
        parts.append(SimpleNamespace(cluster_id=cluster_id, pool_rows=rows, inputs=inputs))
    results, snapshot = engine_bridge.summarise(created, parts)
    assert services.finish(created.pk, run_id, results=results, input_snapshot=snapshot)
    return Analysis.objects.get(pk=created.pk)


@pytest.fixture
def fleet(demo_fleet, alpha, import_text, planner, django_capture_on_commit_callbacks):  # noqa: F811
    from accounting.models import GresAlias, PartitionMapping
    from inventory.models import AcceleratorModel, Pool
    from tests.planner.api.conftest import compute_now, plan_payload

    import_text(alpha, sacct_text())
    import_text(alpha, SREPORT_TEXT, kind="sreport")
    h100 = AcceleratorModel.objects.get(name="H100 SXM5 80GB")
    GresAlias.objects.create(gres_type="hopper", accelerator=h100, notes="site name")
    PartitionMapping.objects.create(cluster=alpha, partition="h100", pool=alpha.pools.first())
    serving_load(Pool.objects.get(name="serving-l40s"))
    with django_capture_on_commit_callbacks(execute=False):
        analysis = finished_analysis()
        from rest_framework.test import APIClient

        client = APIClient()
        client.force_login(planner)
        plan = client.post("/api/v1/plans/", plan_payload(), format="json").json()
    compute_now(plan["id"])
    return SimpleNamespace(alpha=alpha, analysis=analysis, plan_id=plan["id"])


def serving_load(pool):
    """A month of measured serving load on the demo's inference pool."""
    from accounting.models import ServingLoad

    return ServingLoad.objects.create(
        pool=pool,
        period_start=dt.datetime(2024, 7, 1, tzinfo=dt.UTC),
        period_end=dt.datetime(2024, 8, 1, tzinfo=dt.UTC),
        served_tokens_per_s=2000.0,
        model_params=8e9,
        weight_precision="bf16",
        kv_precision="bf16",
        input_tokens=1000,
        output_tokens=300,
    )


# -- reading back ---------------------------------------------------------------------------


def flat_rows(body) -> list[dict]:
    from core.tabular.columns import flatten, table_rows

    rows = [flatten(row) for row in table_rows(body)]
    # A table has the union of the rows' columns (first seen first); a missing key is null.
    names = list(dict.fromkeys(name for row in rows for name in row))
    return [{name: row.get(name) for name in names} for row in rows]


def body_of(response) -> bytes:
    return b"".join(response.streaming_content) if response.streaming else response.content


def csv_rows(content) -> list[dict]:
    if not isinstance(content, bytes):
        content = body_of(content)
    frame = pd.read_csv(io.BytesIO(content), dtype=str, keep_default_na=False)
    return frame.to_dict("records")


def xlsx_rows(content: bytes) -> tuple[list[dict], openpyxl.Workbook]:
    book = openpyxl.load_workbook(io.BytesIO(content))
    sheet = book.worksheets[0]
    values = list(sheet.iter_rows(values_only=True))
    header = list(values[0])
    return [dict(zip(header, row, strict=True)) for row in values[1:]], book


def _is_number(value) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _as_utc_naive(text: str) -> dt.datetime:
    value = dt.datetime.fromisoformat(text)
    return value.astimezone(dt.UTC).replace(tzinfo=None) if value.tzinfo else value


def assert_csv_equals_json(read_back: list[dict], expected: list[dict]) -> None:
    """CSV text equals the JSON value: numbers as numbers, null as empty, lists as JSON."""
    assert len(read_back) == len(expected)
    for got, want in zip(read_back, expected, strict=True):
        assert list(got) == list(want)
        for name, value in want.items():
            text = got[name]
            if value is None:
                assert text == "", name
            elif isinstance(value, bool):
                assert text == ("true" if value else "false"), name
            elif _is_number(value):
                assert math.isclose(float(text), value, rel_tol=1e-12), (name, text, value)
            elif isinstance(value, list | dict):
                assert json.loads(text) == value, name
            else:
                assert text == value, (name, text, value)


def assert_xlsx_equals_json(read_back: list[dict], expected: list[dict]) -> None:
    """XLSX cells are typed: numbers are numbers, booleans booleans, times Excel dates."""
    assert len(read_back) == len(expected)
    for got, want in zip(read_back, expected, strict=True):
        assert list(got) == list(want)
        for name, value in want.items():
            cell = got[name]
            if value is None or value == "":
                assert cell in (None, ""), name
            elif isinstance(value, bool):
                assert cell is value, name
            elif _is_number(value):
                assert _is_number(cell) and math.isclose(cell, value, rel_tol=1e-12), name
            elif isinstance(cell, dt.datetime):
                # Excel keeps times to the millisecond.
                assert abs(cell - _as_utc_naive(value)) < dt.timedelta(milliseconds=1), name
            elif isinstance(value, list | dict):
                assert json.loads(cell) == value, name
            else:
                assert cell == value, (name, cell, value)

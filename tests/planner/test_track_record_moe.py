"""The mixture-of-experts training runs on "How accurate is the planner?": their own group
(calibration check, held back), each run's error or why it has none, the summary of the
committed file."""

from __future__ import annotations

import copy

import pytest
from django.utils.html import escape

from engine.track_record import load_track_record
from planner import track_record as page_data
from planner.track_record import MOE_GROUP_LABELS, track_record_page

URL = "/planner/track-record/"


@pytest.fixture
def record():
    return load_track_record()


def test_the_page_data_carries_the_moe_group_apart_from_the_dense_runs(record):
    page = track_record_page()
    moe = page["moe"]
    assert [row["id"] for row in moe["rows"]] == [row["id"] for row in record["moe"]["rows"]]
    assert [s["label"] for s in moe["summary"]] == [
        MOE_GROUP_LABELS[g] for g in record["moe"]["summary"]
    ]
    assert {row["role_label"] for row in moe["rows"]} == {"Calibration check", "Held back"}
    dense_ids = {row["id"] for row in page["rows"]}
    assert not dense_ids & {row["id"] for row in moe["rows"]}


@pytest.mark.django_db
def test_the_page_shows_each_moe_run_with_its_error_and_source(client, viewer, record):
    client.force_login(viewer)
    html = client.get(URL).content.decode()
    section = html[html.index('id="moe-heading"') : html.index('id="serving-heading"')]
    for row in record["moe"]["rows"]:
        start = section.index(f'id="moe-{row["id"]}"')
        cells = section[start : section.index("</tr>", start)]
        assert escape(row["name"]) in cells and escape(row["source"]) in cells, row["id"]
        if row["modeled"] is None:
            assert escape(row["reason"]) in cells, row["id"]
        else:
            assert f"{row['error_percent']:+.1f} %" in cells, row["id"]
    for group, stats in record["moe"]["summary"].items():
        assert escape(MOE_GROUP_LABELS[group]) in section, group
        assert f"{stats['median_abs_error_percent']:.1f} %" in section, group
        assert f"{stats['worst_error_percent']:+.1f} %" in section, group
        assert f"{stats['inside_band']} of {stats['modeled']}" in section, group


@pytest.mark.django_db
def test_a_run_the_model_cannot_evaluate_shows_why_instead_of_a_number(
    client, viewer, record, monkeypatch
):
    unmodeled = copy.deepcopy(record)
    row = unmodeled["moe"]["rows"][-1]
    reason = "no feasible split: the experts do not fit the cards' memory"
    row.update(
        modeled=None, modeled_low=None, modeled_high=None, error_percent=None,
        inside_band=None, split="", reason=reason,
    )  # fmt: skip
    monkeypatch.setattr(page_data, "load_track_record", lambda: unmodeled)
    client.force_login(viewer)
    html = client.get(URL).content.decode()
    start = html.index(f'id="moe-{row["id"]}"')
    cells = html[start : html.index("</tr>", start)]
    assert escape(reason) in cells and "—" in cells
    assert '<td class="num">—</td>' in cells  # the error cell: a dash, no figure


def test_a_record_without_moe_runs_shows_no_moe_section(record, monkeypatch):
    bare = {key: value for key, value in record.items() if key != "moe"}
    monkeypatch.setattr(page_data, "load_track_record", lambda: bare)
    assert track_record_page()["moe"] is None

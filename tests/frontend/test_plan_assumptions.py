"""The plan page shows the assumptions that move days (issue 14): utilization, effective time
and scaling with provenance, running days, and that days = running days ÷ utilization."""

from __future__ import annotations

import re

import pytest

pytestmark = pytest.mark.django_db


def test_options_table_states_utilization_and_running_days(client, viewer, plan):
    client.force_login(viewer)
    html = client.get(f"/planner/{plan.pk}/").content.decode()
    assert "Days = running days ÷ utilization" in html
    for row in plan.results["options"]:
        if not row["feasible"]:
            continue
        cells = re.search(rf'<tr data-option-id="{row["option_id"]}".*?</tr>', html, re.S)
        if cells is None:  # on another page of the table
            continue
        cells = cells.group(0)
        running = re.search(r'data-col="running_days">([^<]*)<', cells).group(1)
        assert running == f"{row['running_days']:.1f}"
        assert row["days"] == pytest.approx(row["running_days"] / row["utilization"], rel=1e-6)
        utilization = re.search(r'data-col="utilization">(.*?)</td>', cells, re.S).group(1)
        assert f"{row['utilization'] * 100:.1f} %" in utilization
        assert row["utilization_provenance"] in utilization

"""The alerts page says what a new rule's first evaluation found (issue #28): it always said
"evaluated: no_data", the default state of the form's unsaved copy, whatever evaluate() saved."""

from __future__ import annotations

import datetime as dt

import pytest
from django.contrib.messages import get_messages

from tests.support.builders import stored_fleet_analysis

pytestmark = pytest.mark.django_db


def new_rule(client, threshold: str) -> str:
    form = {
        "name": f"Fleet MFU under {threshold}",
        "metric": "mfu",
        "scope": "fleet",
        "direction": "below",
        "threshold": threshold,
        "window_days": "7",
        "enabled": "on",
        "recipients_text": "",
    }
    response = client.post("/alerts/", form)
    assert response.status_code == 302, response.content.decode()[:2000]
    # The newest message (an earlier one waits until a page shows it).
    return [str(m) for m in get_messages(response.wsgi_request)][-1]


def test_the_message_names_the_state_the_evaluation_found(client, planner):
    client.force_login(planner)
    stored_fleet_analysis(mfu=0.2, now=dt.datetime.now(dt.UTC))
    assert new_rule(client, "0.4") == "Rule “Fleet MFU under 0.4” saved and evaluated: firing."
    assert new_rule(client, "0.1") == "Rule “Fleet MFU under 0.1” saved and evaluated: ok."


def test_without_data_the_message_says_why(client, planner):
    client.force_login(planner)
    message = new_rule(client, "0.4")
    assert message.startswith("Rule “Fleet MFU under 0.4” saved and evaluated: no data (")
    assert "No successful analysis" in message

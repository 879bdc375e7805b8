"""Two planners edit one site in real browsers: the second save is refused, both values shown."""

from __future__ import annotations

import pytest

from access.roles import PLANNER
from inventory.models import Site
from tests.support.browser import log_in
from tests.support.builders import make_user

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_second_of_two_planners_is_refused_and_sees_both_values(
    page_factory, browser_planner, screenshot
):
    site = Site.objects.create(name="Oslo", location="Fornebu", pue=1.2, tariff_per_kwh=0.05)
    make_user("second-planner", PLANNER)
    first, second = page_factory(), page_factory()
    log_in(first, browser_planner.username, "pw-" + browser_planner.username)
    log_in(second, "second-planner", "pw-second-planner")
    for page in (first, second):
        page.goto(f"/inventory/sites/{site.pk}/edit/")

    first.get_by_label("Measured PUE").fill("1.35")
    first.get_by_label("Location").fill("Oslo S")
    first.get_by_role("button", name="Save").click()
    first.wait_for_url(f"**/inventory/sites/{site.pk}/")

    second.get_by_label("Measured PUE").fill("1.15")
    second.get_by_role("button", name="Save").click()
    conflict = second.get_by_role("region", name="Changed since you opened it")
    conflict.wait_for()
    text = conflict.inner_text()
    assert f"was changed by {browser_planner.username} at" in text
    row = conflict.get_by_role("row", name="Measured PUE")
    assert row.get_by_role("cell").all_inner_texts() == ["1.35", "1.15"]
    # Untouched by the second planner: the first one's value is now in the form.
    assert "not changed by you" in conflict.get_by_role("row", name="Location").inner_text()
    assert second.get_by_label("Location").input_value() == "Oslo S"
    screenshot(second, "inventory-edit-conflict")
    site.refresh_from_db()
    assert site.pue == 1.35  # nothing silently reverted

    # Saving again after seeing both values is a deliberate choice.
    second.get_by_role("button", name="Save").click()
    second.wait_for_url(f"**/inventory/sites/{site.pk}/")
    site.refresh_from_db()
    assert (site.pue, site.location) == (1.15, "Oslo S")

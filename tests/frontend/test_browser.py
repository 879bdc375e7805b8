"""The inventory in a real headless Chromium: login, forms, a heterogeneous pool, bulk import."""

from __future__ import annotations

import re

import pytest

from inventory.models import NodeGroup, Pool, Site
from tests.support.browser import TABLET, log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

BAD_SITES_CSV = (
    "name,location,cooling_type,pue,tariff_per_kwh,currency\n"
    "Oslo DC3,Oslo,direct_liquid,1.15,0.07,EUR\n"
    "Bergen DC1,Bergen,air,0.8,0.06,EUR\n"
)
GOOD_SITES_CSV = BAD_SITES_CSV.replace(",0.8,", ",1.3,")

# Checks run in the page: every form control has a label, headings never skip a level.
UNLABELLED_CONTROLS_JS = """
() => [...document.querySelectorAll('input:not([type=hidden]), select, textarea')]
  .filter(el => !(el.labels && el.labels.length) && !el.getAttribute('aria-label'))
  .map(el => el.name || el.id)
"""
HEADING_LEVELS_JS = "() => [...document.querySelectorAll('h1,h2,h3,h4')].map(h => +h.tagName[1])"


def assert_accessible_basics(page) -> None:
    assert page.evaluate(UNLABELLED_CONTROLS_JS) == []
    levels = page.evaluate(HEADING_LEVELS_JS)
    assert levels and levels[0] == 1 and levels.count(1) == 1, levels
    assert all(b - a <= 1 for a, b in zip(levels, levels[1:], strict=False)), levels


def test_login_leads_to_the_fleet_page(page_factory, browser_planner, screenshot):
    page = page_factory()
    page.goto("/inventory/")
    assert "/accounts/login/" in page.url
    screenshot(page, "login")
    page.get_by_label("Username").fill(browser_planner.username)
    page.get_by_label("Password").fill("pw-" + browser_planner.username)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url(re.compile(r"/inventory/$"))
    assert page.get_by_role("heading", level=1).inner_text() == "Inventory"
    nav = page.get_by_role("navigation", name="Main")
    for label in ["Fleet", "Inventory", "Analyses", "Usage", "Costs", "Planner", "Reports", "API"]:
        assert nav.get_by_role("link", name=label, exact=True).count() == 1


def test_add_a_site_and_a_heterogeneous_pool_through_the_forms(browser_page, screenshot):
    page = browser_page
    page.goto("/inventory/sites/")
    page.get_by_role("link", name="New site").click()
    page.get_by_label("Name").fill("Oslo DC3")
    page.get_by_label("Measured PUE").fill("3.4")
    page.get_by_role("button", name="Save").click()
    # The model's rule shows next to its field, and the summary links to it.
    pue_errors = page.locator("#id_pue_error")
    assert "unusually high" in pue_errors.inner_text()
    assert page.get_by_label("Measured PUE").get_attribute("aria-invalid") == "true"
    screenshot(page, "site-form-errors")
    page.get_by_label("Measured PUE").fill("1.15")
    # Money is stated (or ticked unknown), never pre-filled.
    page.get_by_label("Electricity tariff per kWh").fill("0.12")
    page.get_by_label("Currency").fill("NOK")
    page.get_by_label("Carbon intensity unknown").check()
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(re.compile(r"/inventory/sites/\d+/$"))
    assert "Added site" in page.locator(".messages").inner_text()

    page.get_by_role("link", name="Add a cluster").click()
    assert page.get_by_label("Site").input_value() == str(Site.objects.get(name="Oslo DC3").pk)
    page.get_by_label("Name").fill("train-1")
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(re.compile(r"/inventory/clusters/\d+/$"))

    page.get_by_role("link", name="Add a pool").click()
    page.get_by_label("Name").fill("mixed")
    page.get_by_role("button", name="Save").click()
    page.wait_for_url(re.compile(r"/inventory/pools/\d+/$"))
    pool_url = page.url

    for name, accelerator, nodes in [
        ("a100", "A100 SXM4 80GB", "4"),
        ("h100", "H100 SXM5 80GB", "2"),
    ]:
        form = page.locator("form", has=page.get_by_role("button", name="Add node group"))
        form.get_by_label("Name").fill(name)
        form.get_by_label("Accelerator").select_option(label=accelerator)
        form.get_by_label("Node count").fill(nodes)
        # The form posts back to the pool page: wait for the navigation, not the current URL.
        with page.expect_navigation():
            form.get_by_role("button", name="Add node group").click()
        page.wait_for_url(pool_url)

    assert page.locator("h1 .badge").inner_text() == "heterogeneous"
    stats = page.get_by_label("Derived totals")
    assert "48" in stats.inner_text()  # (4 + 2) nodes × 8 cards
    mix = page.locator("table", has=page.get_by_text("Cards of this pool by accelerator model"))
    assert mix.get_by_role("row").count() == 4  # header, two models, total
    assert_accessible_basics(page)
    screenshot(page, "pool-detail-heterogeneous")

    pool = Pool.objects.get(name="mixed", cluster__site__name="Oslo DC3")
    names = set(NodeGroup.objects.filter(pool=pool).values_list("accelerator__name", flat=True))
    assert names == {"A100 SXM4 80GB", "H100 SXM5 80GB"}


def test_bulk_import_saves_nothing_from_a_bad_file_then_everything_from_a_good_one(
    browser_page, screenshot
):
    page = browser_page
    page.goto("/inventory/import/sites/")
    assert_accessible_basics(page)
    screenshot(page, "import-upload")

    def upload(content: str) -> None:
        page.get_by_label("File (.csv or .xlsx)").set_input_files(
            files=[{"name": "sites.csv", "mimeType": "text/csv", "buffer": content.encode()}]
        )
        page.get_by_role("button", name="Preview").click()
        page.wait_for_url(re.compile(r"/inventory/import/sites/preview/$"))

    upload(BAD_SITES_CSV)
    summary = page.locator(".error-summary")
    assert "Nothing has been saved" in summary.inner_text()
    assert "row 3, column pue:" in summary.inner_text()
    assert page.get_by_role("button", name=re.compile("^Save")).count() == 0
    assert page.locator("tr#row-3 td.cell-error").inner_text() == "0.8"
    screenshot(page, "import-preview-errors")
    assert Site.objects.count() == 0

    page.get_by_role("link", name="Upload a corrected file").click()
    upload(GOOD_SITES_CSV)
    assert page.locator(".error-summary").count() == 0
    assert Site.objects.count() == 0  # the preview saves nothing
    screenshot(page, "import-preview-valid")
    page.get_by_role("button", name="Save 2 rows").click()
    page.wait_for_url(re.compile(r"/inventory/sites/$"))
    assert "2 added" in page.locator(".messages").inner_text()
    assert sorted(Site.objects.values_list("name", flat=True)) == ["Bergen DC1", "Oslo DC3"]
    screenshot(page, "import-done-site-list")


def test_main_pages_render_cleanly_on_laptop_and_tablet(page_factory, browser_planner, screenshot):
    from inventory.services import load_demo_fleet

    load_demo_fleet()
    pool = Pool.objects.get(name="mixed-a100-h100")
    pages = {
        "fleet": "/",
        "inventory": "/inventory/",
        "sites": "/inventory/sites/",
        "site-detail": f"/inventory/sites/{pool.cluster.site_id}/",
        "clusters": "/inventory/clusters/",
        "cluster-detail": f"/inventory/clusters/{pool.cluster_id}/",
        "pools": "/inventory/pools/",
        "pool-detail": f"/inventory/pools/{pool.pk}/",
        "node-groups": "/inventory/node-groups/",
        "card-catalog": "/inventory/accelerators/",
        "accelerator-detail": f"/inventory/accelerators/{pool.node_groups.first().accelerator_id}/",
        "import": "/inventory/import/",
        "site-edit": f"/inventory/sites/{pool.cluster.site_id}/edit/",
        "site-delete-protected": f"/inventory/sites/{pool.cluster.site_id}/delete/",
        "cluster-delete": f"/inventory/clusters/{pool.cluster_id}/delete/",
        "import-node-groups": "/inventory/import/node-groups/",
        "pool-history": f"/inventory/pools/{pool.pk}/history/",
        "analyses": "/analyses/",
        "usage": "/usage/",
        "usage-imports": "/usage/imports/",
        "costs": "/costs/",
        "planner": "/planner/",
        "reports": "/reports/",
    }
    for device, viewport in [("laptop", None), ("tablet", TABLET)]:
        page = page_factory(viewport)
        log_in(page, browser_planner.username, "pw-" + browser_planner.username)
        for name, url in pages.items():
            response = page.goto(url)
            assert response.status == 200, url
            assert_accessible_basics(page)
            if device == "laptop" or name in {"fleet", "pool-detail", "sites", "site-edit"}:
                screenshot(page, f"{device}-{name}")
            # Nothing wider than the screen: wide tables and charts scroll or shrink inside.
            overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, (device, name)

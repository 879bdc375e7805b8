"""The Inference tab in a real headless Chromium: the what-if sliders call the estimate."""

from __future__ import annotations

import pytest

from tests.support.browser import assert_accessible_basics

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

QUERY = (
    "/planner/inference/?model_params=70e9&weight_precision=fp8&kv_precision=fp8"
    "&input_tokens=1000&output_tokens=500&requests_per_s=10&tpot_ms=50"
    "&accelerator=H100+SXM5+80GB"
)


def _cards(page) -> int:
    return int(page.locator('[data-result="cards"]').inner_text().split()[0])


def test_more_traffic_on_the_slider_needs_more_cards(browser_page):
    page = browser_page
    page.goto(QUERY)
    assert page.get_by_role("heading", level=1).inner_text() == "Capacity planner: inference"
    assert_accessible_basics(page)
    assert page.locator("#chart-planner-inference-roofline svg").first.is_visible()
    before = _cards(page)
    slider = page.locator("#whatif-requests_per_s")
    slider.focus()
    for _ in range(20):
        page.keyboard.press("ArrowRight")  # +1 request/s each: 10 -> 30
    page.wait_for_function(
        "n => parseInt(document.querySelector('[data-result=\"cards\"]').textContent) > n",
        arg=before,
    )
    assert _cards(page) > before
    assert "What-if estimate on H100 SXM5 80GB" in page.locator("[data-whatif-note]").inner_text()

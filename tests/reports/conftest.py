"""Fixtures of the report tests. Their fleet is the shared `report_fleet` (two clusters with
February and March 2024 usage: `tests.support.builders.report_fleet`); the browser fixtures
are shared too (tests/support/fixtures/browser.py)."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def report_media(settings, tmp_path):
    """Report files go to a fresh folder per test (never into var/media)."""
    settings.MEDIA_ROOT = str(tmp_path / "media")
    return tmp_path / "media"


@pytest.fixture
def two_currencies(report_fleet):
    from inventory.models import Site

    euro_site = Site.objects.create(
        name="Euro DC", cooling_type="air", pue=1.4, tariff_per_kwh=0.2, currency="EUR"
    )
    report_fleet["beta"].site = euro_site
    report_fleet["beta"].save()
    return report_fleet

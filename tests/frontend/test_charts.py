"""Chart plumbing: plotly.js is served by the app itself, chart data needs login."""

import pytest
from django.contrib.staticfiles import finders

from frontend.charts import REGISTRY

pytestmark = pytest.mark.django_db


def test_plotly_js_is_found_in_the_plotly_package():
    path = finders.find("plotly/plotly.min.js")
    assert path and path.endswith("package_data/plotly.min.js")
    with open(path, encoding="utf-8") as handle:
        assert "plotly.js" in handle.read(4096)


def test_plotly_js_is_served_without_a_cdn(client, viewer):
    client.force_login(viewer)
    response = client.get("/static/plotly/plotly.min.js")
    assert response.status_code == 200
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert len(body) > 1_000_000


def test_chart_data_needs_login_and_a_known_chart(client, viewer):
    response = client.get("/charts/no-such-chart.csv")
    assert response.status_code == 302 and "login" in response["Location"]
    client.force_login(viewer)
    assert client.get("/charts/no-such-chart.csv").status_code == 404
    if REGISTRY:
        key = next(iter(REGISTRY))
        assert client.get(f"/charts/{key}.pdf").status_code == 404

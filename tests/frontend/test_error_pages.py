"""Not found, not allowed and server errors answer with the app's own pages, in its layout;
with DEBUG on too for a page's own 404 (a link inside the app), never Django's debug page."""

import pytest
from django.urls import path

from config.urls import urlpatterns as app_urlpatterns

pytestmark = pytest.mark.django_db


def _boom(request):
    raise RuntimeError("an error nobody expected")


# This module is also the URLconf of the 500 test: the app's routes and one that fails.
urlpatterns = [path("boom/", _boom), *app_urlpatterns]

BRAND = '<a class="brand" href="/">Fleetwise</a>'
MAIN_NAV = '<nav aria-label="Main"'
DEBUG_PAGE_MARKS = ("Using the URLconf", "Raised by:", "Django tried these URL patterns")


def _is_app_page(html: str) -> bool:
    return BRAND in html and MAIN_NAV in html and not any(m in html for m in DEBUG_PAGE_MARKS)


@pytest.mark.parametrize("debug", [False, True])
def test_a_missing_object_is_the_apps_404_page(client, viewer, settings, debug):
    settings.DEBUG = debug
    client.force_login(viewer)
    response = client.get("/analyses/999999/")
    assert response.status_code == 404
    html = response.content.decode()
    assert _is_app_page(html), html[:500]
    assert "<h1>Not found</h1>" in html and "/analyses/999999/" in html
    assert 'href="/analyses/"' in html and viewer.username in html


def test_with_debug_an_address_that_matches_no_route_keeps_djangos_list(client, viewer, settings):
    settings.DEBUG = True
    client.force_login(viewer)
    response = client.get("/no-such-page/")
    assert response.status_code == 404
    assert "Using the URLconf" in response.content.decode()


def test_with_debug_the_api_still_answers_json(client_for, viewer, settings):
    settings.DEBUG = True
    response = client_for(viewer).get("/api/v1/analyses/999999/")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")


def test_a_role_that_may_not_is_the_apps_403_page(client, viewer):
    client.force_login(viewer)
    response = client.get("/inventory/sites/new/")
    assert response.status_code == 403
    html = response.content.decode()
    assert _is_app_page(html) and "<h1>Not allowed</h1>" in html


@pytest.mark.urls(__name__)
def test_an_unexpected_error_is_the_apps_500_page(client, viewer, settings):
    settings.DEBUG = False
    client.raise_request_exception = False
    client.force_login(viewer)
    response = client.get("/boom/")
    assert response.status_code == 500
    html = response.content.decode()
    assert BRAND in html and "<h1>Something went wrong</h1>" in html
    assert "an error nobody expected" not in html and "Traceback" not in html

"""Every browser form needs its CSRF token: a POST without one is refused (403) on every
page URL, the login and logout and the admin; the API refuses a session POST without it."""

from __future__ import annotations

import re

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

pytestmark = pytest.mark.django_db

# Values for URL converters; the CSRF check runs before the view looks anything up.
SAMPLE = {"int": "1", "slug": "sites", "str": "csv", "path": "x"}


def page_urls() -> list[str]:
    """Every non-API URL of the project, with sample values in its parameters."""

    def walk(patterns, prefix=""):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                yield prefix + str(pattern.pattern)

    urls = []
    for route in walk(get_resolver().url_patterns):
        if route.startswith(("api/", "admin/")) or route.startswith("^"):
            continue
        url = "/" + re.sub(r"<(?:(\w+):)?\w+>", lambda m: SAMPLE[m.group(1) or "str"], route)
        urls.append(url)
    return urls + ["/admin/login/", "/admin/inventory/site/add/"]


@pytest.fixture
def csrf_client(planner):
    client = Client(enforce_csrf_checks=True)
    client.force_login(planner)
    return client


def test_every_page_url_refuses_a_post_without_a_csrf_token(csrf_client):
    urls = page_urls()
    assert "/inventory/sites/new/" in urls and "/inventory/sites/1/history/1/revert/" in urls
    accepted = []
    for url in urls:
        response = csrf_client.post(url, {"name": "x"})
        if response.status_code != 403 or b"CSRF" not in response.content:
            accepted.append(f"{url}: {response.status_code}")
    assert accepted == []


def test_login_and_logout_need_the_token_too(planner):
    anonymous = Client(enforce_csrf_checks=True)
    login = anonymous.post("/accounts/login/", {"username": "planner", "password": "pw-planner"})
    assert login.status_code == 403 and b"CSRF" in login.content

    signed_in = Client(enforce_csrf_checks=True)
    signed_in.force_login(planner)
    assert signed_in.post("/accounts/logout/").status_code == 403
    assert "_auth_user_id" in signed_in.session


def test_with_the_token_the_same_form_works(csrf_client):
    from inventory.models import Site

    page = csrf_client.get("/inventory/sites/new/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())
    form = {
        "name": "Oslo",
        "cooling_type": "air",
        "tariff_per_kwh": "0.05",
        "currency": "EUR",
        "grid_carbon_g_per_kwh": "20",
        "csrfmiddlewaretoken": token.group(1),
    }
    assert csrf_client.post("/inventory/sites/new/", form).status_code == 302
    assert Site.objects.filter(name="Oslo").exists()


def test_the_api_refuses_a_session_post_without_the_token(csrf_client):
    response = csrf_client.post("/api/v1/sites/", {"name": "x"}, content_type="application/json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]

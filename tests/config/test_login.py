"""Logins: password rules in every non-test setting, rate limiting with a clear lockout
message (django-axes), and neither the test client's login() nor API tokens broken by it."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client, RequestFactory, override_settings
from freezegun import freeze_time
from rest_framework.test import APIClient

from access.tokens import issue_token
from config.auth import client_ip

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
LOCKED = "Too many failed logins for this username from your address. Try again in 15 minutes"


def attempt(client: Client, username: str, password: str, address: str = "10.0.0.1"):
    return client.post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def test_five_failures_lock_that_username_and_address_with_a_clear_message(planner):
    client = Client()
    for _ in range(4):
        assert attempt(client, "planner", "wrong").status_code == 200
    locked = attempt(client, "planner", "wrong")
    assert locked.status_code == 429
    assert LOCKED in locked.content.decode()
    # Even the right password is refused while locked, with the same message.
    again = attempt(client, "planner", "pw-planner")
    assert again.status_code == 429 and LOCKED in again.content.decode()
    assert "_auth_user_id" not in client.session

    # Another address, or another username from this one, is not locked.
    assert attempt(Client(), "planner", "pw-planner", address="10.0.0.2").status_code == 302


def test_the_lock_ends_after_the_cool_off(planner):
    with freeze_time("2026-01-01 12:00:00") as clock:
        for _ in range(5):
            attempt(Client(), "planner", "wrong")
        assert attempt(Client(), "planner", "pw-planner").status_code == 429
        clock.tick(dt.timedelta(minutes=16))
        assert attempt(Client(), "planner", "pw-planner").status_code == 302


def test_a_successful_login_resets_the_count(planner):
    for _ in range(4):
        attempt(Client(), "planner", "wrong")
    assert attempt(Client(), "planner", "pw-planner").status_code == 302
    for _ in range(4):
        assert attempt(Client(), "planner", "wrong").status_code == 200
    assert attempt(Client(), "planner", "pw-planner").status_code == 302


def test_the_admin_login_is_limited_too(fleet_admin):
    client = Client()
    for _ in range(5):
        response = client.post(
            "/admin/login/", {"username": "fleetadmin", "password": "wrong"}, REMOTE_ADDR="10.0.0.9"
        )
    assert response.status_code == 429 and LOCKED in response.content.decode()


def test_test_client_login_and_api_tokens_still_work(planner):
    client = Client()
    assert client.login(username="planner", password="pw-planner") is True
    assert client.login(username="planner", password="wrong") is False
    assert client.get("/inventory/").status_code == 200

    # A token is not a password: it works, even while the login form is locked for the user.
    for _ in range(5):
        attempt(Client(), "planner", "wrong", address="127.0.0.1")
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {issue_token(planner)[1]}")
    assert api.get("/api/v1/sites/").status_code == 200
    site = {"name": "Token site", "tariff_unknown": True, "currency": "EUR"}
    assert api.post("/api/v1/sites/", site).status_code == 201


@pytest.mark.parametrize(
    ("proxies", "forwarded", "expected"),
    [
        (0, "203.0.113.9", "192.0.2.1"),  # no proxy: a client cannot choose its address
        (1, "203.0.113.9", "203.0.113.9"),
        (1, "198.51.100.7, 203.0.113.9", "203.0.113.9"),  # the client's own entry is ignored
        (2, "198.51.100.7, 203.0.113.9", "198.51.100.7"),
        (2, "203.0.113.9", "192.0.2.1"),  # fewer hops than proxies: the peer
    ],
)
def test_client_address_trusts_only_the_configured_proxies(proxies, forwarded, expected):
    request = RequestFactory().get("/", REMOTE_ADDR="192.0.2.1", HTTP_X_FORWARDED_FOR=forwarded)
    with override_settings(FLEETWISE_TRUSTED_PROXY_COUNT=proxies):
        assert client_ip(request) == expected

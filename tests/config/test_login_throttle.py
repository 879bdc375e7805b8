"""Login throttling per address across usernames (issue #28): one password sprayed over many
usernames from one address is limited, not only a pair of username and address
(config/auth.py, LoginAttemptsHandler; the per-pair rules are in test_login.py)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.test import Client
from freezegun import freeze_time

from tests.support.builders import make_user

pytestmark = pytest.mark.django_db

LOGIN = "/accounts/login/"
SPRAYER = "10.0.0.66"
ADDRESS_LOCKED = "Too many failed logins from your address, for several usernames."


def attempt(username: str, password: str, address: str = SPRAYER):
    return Client().post(LOGIN, {"username": username, "password": password}, REMOTE_ADDR=address)


def spray(count: int, address: str = SPRAYER) -> list[int]:
    """One password tried once against ``count`` usernames, the way a spray goes."""
    return [attempt(f"user{n}", "Winter2025!", address).status_code for n in range(count)]


def test_one_password_over_thirty_usernames_is_stopped_at_the_address_limit(settings):
    assert settings.FLEETWISE_LOGIN_ADDRESS_FAILURE_LIMIT == 20
    statuses = spray(30)
    # Each username failed once (never the per-pair limit of 5); the address reached 20.
    assert statuses[:19] == [200] * 19
    assert statuses[19:] == [429] * 11
    locked = attempt("user99", "Winter2025!")
    assert locked.status_code == 429 and ADDRESS_LOCKED in locked.content.decode()


def test_a_locked_address_refuses_even_a_right_password_and_other_addresses_log_in(planner):
    spray(20)
    refused = attempt("planner", "pw-planner")
    assert refused.status_code == 429 and ADDRESS_LOCKED in refused.content.decode()
    assert attempt("planner", "pw-planner", address="10.0.0.67").status_code == 302


def test_a_successful_login_does_not_reset_the_sprayed_count():
    make_user("insider", "viewer")
    assert spray(15) == [200] * 15
    # The sprayer owns one real account and logs in with it: its own count resets, not the
    # fifteen failures of the other usernames.
    assert attempt("insider", "pw-insider").status_code == 302
    assert spray(5) == [200] * 4 + [429]


def test_the_address_lock_ends_after_the_cool_off(planner):
    with freeze_time("2026-01-01 12:00:00") as clock:
        spray(20)
        assert attempt("planner", "pw-planner").status_code == 429
        clock.tick(dt.timedelta(minutes=16))
        assert attempt("planner", "pw-planner").status_code == 302


def test_failures_spread_over_time_never_reach_the_limit(planner):
    with freeze_time("2026-01-01 12:00:00") as clock:
        for _ in range(4):  # 4 × 10 failures, 16 minutes apart: at most 10 within a cool-off
            assert spray(10) == [200] * 10
            clock.tick(dt.timedelta(minutes=16))
        assert attempt("planner", "pw-planner").status_code == 302

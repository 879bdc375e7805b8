"""Who may receive an object's e-mail (access.recipients): the accounts that may see its
scope; a plain address only through the active accounts holding it, failing closed."""

from __future__ import annotations

import pytest

from access.recipients import audience
from access.scoping import may_see_scope, scope_refusal
from tests.support.builders import make_user, team_viewer

pytestmark = pytest.mark.django_db


def named(user, address: str):
    user.email = address
    user.save(update_fields=["email"])
    return user


def test_a_team_object_goes_to_its_team_and_to_users_of_every_team():
    member = named(team_viewer("member", "team-a"), "member@example.com")
    outsider = named(team_viewer("outsider", "team-b"), "outsider@example.com")
    everyone = named(make_user("everyone", "viewer"), "everyone@example.com")
    result = audience([], [member, outsider, everyone], "team", "team-a")
    assert result.allowed == ("member@example.com", "everyone@example.com")
    assert result.withheld == (
        "outsider@example.com: the account outsider may not see team team-a's figures",
    )


def test_a_fleet_object_goes_only_to_users_who_see_every_team():
    member = named(team_viewer("member", "team-a", "team-b"), "member@example.com")
    everyone = named(make_user("everyone", "planner"), "everyone@example.com")
    result = audience(["MEMBER@example.com"], [everyone], "fleet")
    assert result.allowed == ("everyone@example.com",)
    assert len(result.withheld) == 1
    assert result.withheld[0].startswith("MEMBER@example.com: the account member holding it")
    assert "every team's figures" in result.withheld[0]
    assert member.email == "member@example.com"


def test_plain_addresses_fail_closed():
    named(make_user("list", "viewer"), "list@example.com")
    named(make_user("former", "viewer", is_active=False), "former@example.com")
    named(make_user("norole"), "norole@example.com")
    named(make_user("shared-a", "viewer"), "shared@example.com")
    named(team_viewer("shared-b", "team-b"), "Shared@Example.com")
    result = audience(
        [
            "List@Example.com",
            "nobody@example.com",
            "former@example.com",
            "norole@example.com",
            "shared@example.com",
            "list@example.com",  # the same address again: once
        ],
        [],
        "site",
    )
    assert result.allowed == ("List@Example.com",)
    reasons = dict(line.split(": ", 1) for line in result.withheld)
    assert reasons == {
        "nobody@example.com": "no active account holds this address",
        "former@example.com": "no active account holds this address",
        "norole@example.com": "the account norole holding it may not see every team's "
        "figures (a site scope holds every team's)",
        "shared@example.com": "the account shared-b holding it may not see every team's "
        "figures (a site scope holds every team's)",
    }


def test_inactive_recipient_users_are_withheld_and_users_without_address_skipped():
    gone = named(make_user("gone", "viewer", is_active=False), "gone@example.com")
    silent = make_user("silent", "viewer")
    result = audience([], [gone, silent], "fleet")
    assert result.allowed == ()
    assert result.withheld == ("gone@example.com: the account gone is inactive",)


def test_the_scope_rule_names_the_team():
    planner = team_viewer("planner-a", "team-a", role="planner")
    assert may_see_scope(planner, "team", "team-a")
    assert not may_see_scope(planner, "team", "team-b")
    assert not may_see_scope(planner, "fleet")
    assert (
        scope_refusal(planner, "team", "team-b") == "planner-a may not see team team-b's figures."
    )
    assert scope_refusal(make_user("norole"), "team", "team-a").endswith(
        "no role that reads figures."
    )
    assert scope_refusal(make_user("admin", "admin", all_teams=False), "fleet") == ""

"""Privileges in /admin/ (issue #28, Medium 6): an admin-role user who is not a superuser mints
API tokens only for themselves, never ticks is_superuser or is_staff (their own or anyone's),
gives only the roles below their own, and cannot change a superuser's or another admin's
account (or password); a superuser can do all of it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group, User

from access.tokens import ApiToken
from tests.support.builders import make_user

pytestmark = pytest.mark.django_db

USERS = "/admin/auth/user/"


@pytest.fixture
def root(db):
    return make_user("root", is_staff=True, is_superuser=True)


def change_form(user: User, **extra) -> dict:
    """The fields of the user change page (what a browser posts back)."""
    joined = user.date_joined
    data = {
        "username": user.username,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "email": user.email,
        "is_active": "on",
        "date_joined_0": joined.strftime("%Y-%m-%d"),
        "date_joined_1": joined.strftime("%H:%M:%S"),
        "groups": [group.pk for group in user.groups.all()],
    }
    return {**data, **extra}


def test_an_admin_mints_tokens_for_themselves_only(client, fleet_admin, root, viewer):
    client.force_login(fleet_admin)
    for target in (root, viewer):
        response = client.post("/admin/access/apitoken/add/", {"user": target.pk, "name": "x"})
        assert response.status_code == 200  # the form again, with its error
        assert "Select a valid choice" in response.content.decode()
    assert not ApiToken.objects.exists()
    client.post("/admin/access/apitoken/add/", {"user": fleet_admin.pk, "name": "mine"})
    assert list(ApiToken.objects.values_list("user__username", flat=True)) == ["fleetadmin"]


def test_a_superuser_mints_tokens_for_anyone(client, root, viewer):
    client.force_login(root)
    response = client.post("/admin/access/apitoken/add/", {"user": viewer.pk, "name": "robot"})
    assert response.status_code == 302
    assert ApiToken.objects.get().user == viewer


def test_an_admin_cannot_make_themselves_superuser_or_staff_elsewhere(client, fleet_admin, viewer):
    client.force_login(fleet_admin)
    own = client.post(
        f"{USERS}{fleet_admin.pk}/change/",
        change_form(fleet_admin, is_superuser="on", first_name="Fleet"),
    )
    assert own.status_code == 302, own.content.decode()[:2000]
    fleet_admin.refresh_from_db()
    assert fleet_admin.first_name == "Fleet"  # the rest of the form was saved
    assert not fleet_admin.is_superuser
    assert fleet_admin.groups.filter(name="admin").exists()  # their own role kept
    other = client.post(
        f"{USERS}{viewer.pk}/change/", change_form(viewer, is_superuser="on", is_staff="on")
    )
    assert other.status_code == 302
    viewer.refresh_from_db()
    assert not viewer.is_superuser and not viewer.is_staff


def test_an_admin_gives_only_the_roles_below_their_own(client, fleet_admin, viewer):
    client.force_login(fleet_admin)
    planner_role, admin_role = (Group.objects.get(name=n) for n in ("planner", "admin"))
    refused = client.post(
        f"{USERS}{viewer.pk}/change/", change_form(viewer, groups=[admin_role.pk])
    )
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    assert not viewer.groups.filter(name="admin").exists()
    given = client.post(
        f"{USERS}{viewer.pk}/change/", change_form(viewer, groups=[planner_role.pk])
    )
    assert given.status_code == 302
    assert list(viewer.groups.values_list("name", flat=True)) == ["planner"]


def test_an_admin_cannot_change_a_superuser_or_another_admin(client, fleet_admin, root):
    peer = make_user("peer", "admin", is_staff=True)
    client.force_login(fleet_admin)
    for target in (root, peer):
        response = client.post(f"{USERS}{target.pk}/change/", change_form(target, email="x@y.z"))
        assert response.status_code == 403
        password = client.post(
            f"{USERS}{target.pk}/password/",
            {"password1": "Taken-over-1234", "password2": "Taken-over-1234"},
        )
        assert password.status_code == 403
        assert client.post(f"{USERS}{target.pk}/delete/", {"post": "yes"}).status_code == 403
        target.refresh_from_db()
        assert target.email == "" and target.check_password("pw-" + target.username)


def test_only_superusers_change_the_role_groups(client, fleet_admin, root):
    planner_role = Group.objects.get(name="planner")
    before = planner_role.permissions.count()
    client.force_login(fleet_admin)
    url = f"/admin/auth/group/{planner_role.pk}/change/"
    assert client.get(url).status_code == 200  # read-only view
    response = client.post(url, {"name": "planner", "permissions": []})
    assert response.status_code == 403
    assert planner_role.permissions.count() == before
    client.force_login(root)
    assert client.post(url, {"name": "planner", "permissions": []}).status_code == 302
    assert planner_role.permissions.count() == 0


def test_a_superuser_grants_superuser(client, root, viewer):
    client.force_login(root)
    response = client.post(f"{USERS}{viewer.pk}/change/", change_form(viewer, is_superuser="on"))
    assert response.status_code == 302
    viewer.refresh_from_db()
    assert viewer.is_superuser

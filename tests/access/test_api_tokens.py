"""API tokens are stored as SHA-256 digests: the database never holds a usable key, the
`Token <key>` header still works, deleting the token revokes it, and the migration converts
existing plaintext DRF tokens without breaking their clients."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from rest_framework.test import APIClient

from access.tokens import ApiToken, digest, issue_token

pytestmark = pytest.mark.django_db


def api_with(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    return client


def test_the_database_holds_only_the_digest_and_the_key_authenticates(viewer):
    token, key = issue_token(viewer, name="spreadsheet robot")
    stored = ApiToken.objects.values().get(pk=token.pk)
    assert key not in {str(value) for value in stored.values()}
    assert stored["key_digest"] == digest(key) and len(key) >= 40
    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM authtoken_token")
        assert cursor.fetchone()[0] == 0

    assert api_with(key).get("/api/v1/sites/").status_code == 200
    assert api_with(digest(key)).get("/api/v1/sites/").status_code == 401  # the digest is no key
    assert ApiToken.objects.get(pk=token.pk).last_used_at is not None


def test_deleting_a_token_revokes_it_and_inactive_users_are_refused(viewer):
    token, key = issue_token(viewer)
    other, other_key = issue_token(viewer)
    token.delete()
    assert api_with(key).get("/api/v1/sites/").status_code == 401
    assert api_with(other_key).get("/api/v1/sites/").status_code == 200
    viewer.is_active = False
    viewer.save()
    assert api_with(other_key).get("/api/v1/sites/").status_code == 401


def test_a_superuser_creates_a_token_and_sees_its_key_once(client, viewer):
    from tests.support.builders import make_user

    client.force_login(make_user("root", is_staff=True, is_superuser=True))
    response = client.post(
        "/admin/access/apitoken/add/", {"user": viewer.pk, "name": "robot"}, follow=True
    )
    html = response.content.decode()
    key = re.search(r"is ([A-Za-z0-9_-]{40,}) — copy it now", html).group(1)
    token = ApiToken.objects.get(user=viewer)
    assert token.key_digest == digest(key) and token.key_prefix == key[:6]
    assert api_with(key).get("/api/v1/sites/").status_code == 200
    page = client.get(f"/admin/access/apitoken/{token.pk}/change/").content.decode()
    assert key not in page
    # DRF's plaintext token admin is gone.
    assert client.get("/admin/authtoken/tokenproxy/").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_migration_hashes_existing_plaintext_tokens(django_user_model):
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    before = [("access", "0003_fleet_wide_access"), ("authtoken", "0004_alter_tokenproxy_options")]
    executor.migrate(before)
    old_apps = executor.loader.project_state(before).apps
    user = django_user_model.objects.create_user("legacy", password="pw-legacy")
    plaintext = "0123456789abcdef0123456789abcdef01234567"
    old_apps.get_model("authtoken", "Token").objects.create(key=plaintext, user_id=user.pk)

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(executor.loader.graph.leaf_nodes())

    with connection.cursor() as cursor:
        cursor.execute("SELECT COUNT(*) FROM authtoken_token")
        assert cursor.fetchone()[0] == 0
    converted = ApiToken.objects.get(user=user)
    assert converted.key_digest == digest(plaintext)
    from django.contrib.auth.models import Group

    user.groups.add(Group.objects.get(name="viewer"))
    assert api_with(plaintext).get("/api/v1/sites/").status_code == 200

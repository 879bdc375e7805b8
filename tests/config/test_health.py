"""/healthz/: public, and tells only whether the database answers."""

import pytest

pytestmark = pytest.mark.django_db


def test_healthz_is_public_and_says_ok(client):
    response = client.get("/healthz/")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert "no-cache" in response["Cache-Control"]

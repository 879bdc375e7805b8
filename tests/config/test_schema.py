"""The OpenAPI schema validates without warnings and documents the calculators' bodies; the
schema and its docs need a role."""

import pytest

from tests.support.openapi import validated_schema


@pytest.mark.django_db
def test_schema_validates_without_warnings():
    schema = validated_schema()
    for path in ("effective-time", "pool", "utilization", "training", "inference"):
        operation = schema["paths"][f"/api/v1/estimates/{path}/"]["post"]
        assert "requestBody" in operation, path
        assert "200" in operation["responses"], path
    assert "/api/v1/analyses/{id}/recompute/" in schema["paths"]


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["/api/v1/schema/", "/api/v1/docs/", "/api/v1/redoc/"])
def test_schema_and_docs_need_a_role(client_for, no_role_user, viewer, path):
    assert client_for(no_role_user).get(path).status_code == 403
    assert client_for(None).get(path).status_code == 401
    assert client_for(viewer).get(path).status_code == 200

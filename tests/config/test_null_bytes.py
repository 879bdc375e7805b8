"""A NUL byte in a query parameter is a 400 naming the field, never a database error (500):
PostgreSQL text cannot hold NUL."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("field", ["cluster", "accelerator"])
@pytest.mark.parametrize("path", ["/api/v1/accounting/costs/", "/api/v1/accounting/utilization/"])
def test_a_nul_byte_in_a_filter_is_a_400(client, viewer, demo_fleet, field, path):
    client.force_login(viewer)
    response = client.get(path, {field: "train\x00hetero"})
    assert response.status_code == 400, response.content
    assert field in response.json()

"""Pages require login; the home page, admin and offline API docs work for a logged-in user."""

import re

import pytest

pytestmark = pytest.mark.django_db

PAGES = ["/", "/admin/", "/api/v1/docs/", "/api/v1/redoc/", "/api/v1/schema/", "/api/v1/"]


@pytest.mark.parametrize("url", PAGES)
def test_anonymous_is_sent_to_login_or_refused(client, url):
    response = client.get(url)
    assert response.status_code in (302, 401, 403)
    if response.status_code == 302:
        assert "login" in response["Location"]


def test_login_page_is_public_and_labelled(client):
    response = client.get("/accounts/login/")
    assert response.status_code == 200
    html = response.content.decode()
    assert 'for="id_username"' in html and 'for="id_password"' in html


def test_home_lists_pools_and_mix(client, viewer, demo_fleet):
    client.force_login(viewer)
    html = client.get("/").content.decode()
    assert "mixed-a100-h100" in html
    assert "1000 × A100 SXM4 80GB" in html and "1000 × H100 SXM5 80GB" in html
    assert "heterogeneous" in html


def test_admin_lists_the_demo_fleet(client, demo_fleet, django_user_model):
    admin = django_user_model.objects.create_superuser("root", "", "pw")
    client.force_login(admin)
    for url, expected in [
        ("/admin/inventory/site/", "Ulanqab DC2 (liquid)"),
        ("/admin/inventory/cluster/", "train-hetero"),
        ("/admin/inventory/pool/", "1000 × A100 SXM4 80GB + 1000 × H100 SXM5 80GB"),
        ("/admin/inventory/nodegroup/", "h100-nodes"),
        ("/admin/inventory/acceleratormodel/", "Ascend 910B"),
    ]:
        response = client.get(url)
        assert response.status_code == 200, url
        assert expected in response.content.decode(), url


def test_api_docs_are_served_offline(client, viewer):
    client.force_login(viewer)
    html = client.get("/api/v1/docs/").content.decode()
    assert "swagger-ui" in html.lower()
    external = re.findall(r'(?:src|href)="(https?://[^"]+)"', html)
    assert external == [], external
    schema = client.get("/api/v1/schema/", {"format": "json"})
    assert schema.status_code == 200
    paths = schema.json()["paths"]
    for name in ["sites", "accelerator-models", "clusters", "pools", "node-groups"]:
        assert f"/api/v1/{name}/" in paths

"""Every browser page needs login; viewers read (no edit buttons), planners change."""

from __future__ import annotations

import pytest

from inventory.models import AcceleratorModel, Cluster, NodeGroup, Pool, Site

pytestmark = pytest.mark.django_db

SECTIONS = ["analyses", "usage", "costs", "planner", "reports"]


@pytest.fixture
def urls(demo_fleet) -> dict[str, list[str]]:
    """Read pages (viewer may GET) and write pages (planner only), with real object ids."""
    objects = {
        "sites": Site.objects.first(),
        "clusters": Cluster.objects.first(),
        "pools": Pool.objects.get(name="mixed-a100-h100"),
        "node-groups": NodeGroup.objects.first(),
        "accelerators": AcceleratorModel.objects.get(name="L4"),
    }
    read = ["/", "/inventory/", *[f"/{section}/" for section in SECTIONS]]
    write = ["/inventory/import/", f"/inventory/pools/{objects['pools'].pk}/node-groups/new/"]
    for prefix, obj in objects.items():
        read += [f"/inventory/{prefix}/", f"/inventory/{prefix}/{obj.pk}/"]
        write += [
            f"/inventory/{prefix}/new/",
            f"/inventory/{prefix}/{obj.pk}/edit/",
            f"/inventory/{prefix}/{obj.pk}/delete/",
        ]
    read += ["/inventory/import/sites/template.csv", "/inventory/import/pools/template.xlsx"]
    write += ["/inventory/import/sites/", "/inventory/import/node-groups/"]
    return {"read": read, "write": write}


def test_anonymous_is_sent_to_login_everywhere(client, urls):
    for url in urls["read"] + urls["write"]:
        for method in (client.get, client.post):
            response = method(url)
            assert response.status_code == 302, url
            assert response["Location"].startswith("/accounts/login/?next="), url


def test_user_without_a_role_reads_nothing(client, no_role_user, urls):
    client.force_login(no_role_user)
    for url in urls["read"] + urls["write"]:
        assert client.get(url).status_code == 403, url


def test_viewer_reads_but_cannot_write(client, viewer, urls):
    client.force_login(viewer)
    for url in urls["read"]:
        assert client.get(url).status_code == 200, url
    for url in urls["write"]:
        assert client.get(url).status_code == 403, url
    for url in urls["read"] + urls["write"]:
        assert client.post(url, {"name": "x"}).status_code == 403, url
    assert Site.objects.filter(name="x").count() == 0


def test_forbidden_page_explains_the_role(client, viewer, urls):
    client.force_login(viewer)
    response = client.post("/inventory/sites/new/", {"name": "x"})
    html = response.content.decode()
    assert response.status_code == 403
    assert "planner role" in html and "<h1>Not allowed</h1>" in html


def test_planner_opens_every_page(client, planner, urls):
    client.force_login(planner)
    for url in urls["read"] + urls["write"]:
        assert client.get(url).status_code == 200, url


def test_viewer_sees_no_edit_controls(client, viewer, demo_fleet):
    client.force_login(viewer)
    pool = Pool.objects.get(name="mixed-a100-h100")
    pages = [
        "/",
        "/inventory/",
        "/inventory/sites/",
        f"/inventory/pools/{pool.pk}/",
        f"/inventory/sites/{pool.cluster.site_id}/",
    ]
    for url in pages:
        html = client.get(url).content.decode()
        for control in ["/edit/", "/delete/", "/new/", "Recompute on worker", "/inventory/import/"]:
            assert control not in html, (url, control)


def test_planner_sees_edit_controls(client, planner, demo_fleet):
    client.force_login(planner)
    pool = Pool.objects.get(name="mixed-a100-h100")
    html = client.get(f"/inventory/pools/{pool.pk}/").content.decode()
    assert f"/inventory/pools/{pool.pk}/edit/" in html
    assert f"/inventory/pools/{pool.pk}/delete/" in html
    assert "Add a node group" in html


def test_navigation_links_every_section_and_marks_the_current_one(client, viewer):
    client.force_login(viewer)
    html = client.get("/usage/").content.decode()
    for label in ["Fleet", "Inventory", "Analyses", "Usage", "Costs", "Planner", "Reports", "API"]:
        assert f">{label}</a>" in html, label
    assert '<a href="/usage/" aria-current="page">Usage</a>' in html
    assert "<h1>" in html and "Coming soon" not in html


def test_pages_use_only_local_assets(client, viewer, demo_fleet):
    import re

    client.force_login(viewer)
    html = client.get("/inventory/pools/").content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+)"', html)
    assert assets and not [url for url in assets if url.startswith(("http:", "https:", "//"))]
    for url in re.findall(r'(?:src|href)="(/static/[^"]+)"', html):
        response = client.get(url)
        response.close()  # static responses stream an open file
        assert response.status_code == 200, url

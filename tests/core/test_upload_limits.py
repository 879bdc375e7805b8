"""An upload over its view's limit is refused from its Content-Length, before a byte of the
body is read (core.upload_limits): the telemetry upload (API) and the inventory import page.
The body here is 600 MiB made on demand, counting what the server reads of it."""

from __future__ import annotations

import io

import pytest
from django.core.exceptions import RequestDataTooBig
from django.test import RequestFactory

from core.upload_limits import CappedUploadHandler
from tests.support.builders import make_user

BOUNDARY = "fleetwise-test-boundary"
DECLARED_BYTES = 600 * 2**20


class CountingBody(io.RawIOBase):
    """A request body of ``size`` bytes of a multipart file part, made as it is read."""

    def __init__(self, size: int):
        self.size, self.read_bytes = size, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        n = min(len(buffer), self.size - self.read_bytes)
        buffer[:n] = b"x" * n
        self.read_bytes += n
        return n


def post_declared(client, path: str, body: CountingBody):
    return client.generic(
        "POST",
        path,
        b"",
        CONTENT_TYPE=f"multipart/form-data; boundary={BOUNDARY}",
        CONTENT_LENGTH=str(body.size),
        **{"wsgi.input": body},
    )


@pytest.mark.django_db
def test_a_600_mib_telemetry_upload_is_a_413_with_nothing_read(client):
    from telemetry.models import TelemetryFetch

    client.force_login(make_user("planner", "planner"))
    body = CountingBody(DECLARED_BYTES)
    response = post_declared(client, "/api/v1/telemetry/fetches/", body)
    assert response.status_code == 413
    assert response.json() == {
        "detail": "The upload is larger than the 256 MiB limit; nothing of it was read.",
        "max_bytes": 256 * 2**20,
    }
    assert body.read_bytes == 0
    assert not TelemetryFetch.objects.exists()


@pytest.mark.django_db
def test_a_600_mib_inventory_import_is_a_413_with_nothing_read(client):
    client.force_login(make_user("planner", "planner"))
    body = CountingBody(DECLARED_BYTES)
    response = post_declared(client, "/inventory/import/sites/", body)
    assert response.status_code == 413
    assert b"larger than the 5 MiB limit" in response.content
    assert body.read_bytes == 0


@pytest.mark.django_db
def test_a_file_just_over_the_limit_still_gets_the_pages_own_message(client):
    from django.core.files.uploadedfile import SimpleUploadedFile

    client.force_login(make_user("planner", "planner"))
    upload = SimpleUploadedFile("sites.csv", b"name\n" + b"x" * (5 * 2**20), "text/csv")
    response = client.post("/inventory/import/sites/", {"file": upload})
    assert response.status_code == 200
    assert "larger than 5 MB" in response.context["form"].errors["file"][0]


def test_the_stream_cap_stops_a_file_past_it():
    handler = CappedUploadHandler(RequestFactory().post("/"), cap_bytes=10)
    handler.new_file("file", "a.txt", "text/plain", None)
    assert handler.receive_data_chunk(b"12345678", 0) == b"12345678"
    with pytest.raises(RequestDataTooBig):
        handler.receive_data_chunk(b"12345678", 8)

"""Outbound requests by policy (core.outbound): which URLs and addresses are refused, and what
a request does on the wire (redirects, the token, bounded reads, the checked address), against
a stub HTTP server on loopback (tests/support/net.py)."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from core.outbound import (
    OutboundClient,
    OutboundError,
    OutboundPolicy,
    OutboundRefused,
    check_url,
    without_credentials,
)
from tests.support.net import StubHttpServer

PUBLIC = "93.184.216.34"  # a public address, written as a literal: nothing is looked up
STRICT = OutboundPolicy()
LOOPBACK_OK = OutboundPolicy(allow_loopback=True)


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://169.254.169.254/latest/meta-data/", "cloud metadata address"),
        ("http://169.254.10.1:9090", "link-local"),
        ("http://[fe80::1]:9090", "link-local"),
        ("http://[fd00:ec2::254]/", "cloud metadata address"),
        ("http://metadata.google.internal/computeMetadata/v1/", "metadata service"),
        ("http://METADATA.google.internal./", "metadata service"),
        ("http://127.0.0.1:9090", "loopback"),
        ("http://localhost:9090", "loopback"),
        ("http://[::1]:9090", "loopback"),
        ("http://[::ffff:127.0.0.1]:9090", "loopback"),
        ("http://0x7f000001:9090", "loopback"),
        ("http://2130706433:9090", "loopback"),
        ("http://0177.0.0.1:9090", "loopback"),
        ("http://127.1:9090", "loopback"),
        ("http://0.0.0.0:9090", "not a unicast address"),
        ("http://10.1.2.3:9090", "private or internal"),
        ("http://172.16.0.9:9090", "private or internal"),
        ("http://192.168.1.20:9090", "private or internal"),
        ("http://0xa010203:9090", "private or internal"),  # 10.1.2.3
        ("http://100.64.0.1:9090", "private or internal"),  # carrier-grade NAT
        ("ftp://prometheus.example.org/", "not an http:// or https:// URL"),
        ("file:///etc/passwd", "not an http:// or https:// URL"),
        ("gopher://127.0.0.1:6379/_INFO", "not an http:// or https:// URL"),
        (f"http://admin:s3cret@{PUBLIC}:9090", "holds credentials"),
        (f"http://token@{PUBLIC}:9090", "holds credentials"),
        (f"http://{PUBLIC}:99999", "invalid port"),
        ("http://", "names no host"),
        ("http://no-such-host.invalid:9090", "does not resolve"),
    ],
)
def test_each_address_form_is_refused_by_the_default_policy(url, why):
    with pytest.raises(OutboundRefused) as refused:
        check_url(url, STRICT)
    assert why in refused.value.description
    assert "s3cret" not in str(refused.value)


def test_literal_forms_are_normalised_before_they_are_checked():
    target = check_url("http://0x7f000001:9090/prefix", LOOPBACK_OK)
    assert (target.host, target.port, target.path) == ("127.0.0.1", 9090, "/prefix")
    assert target.addresses == (ipaddress.ip_address("127.0.0.1"),)
    assert check_url("http://2130706433:9090", LOOPBACK_OK).host == "127.0.0.1"


def test_public_addresses_pass_and_admins_may_allow_private_networks():
    assert check_url(f"https://{PUBLIC}/prometheus", STRICT).port == 443
    private = OutboundPolicy(allowed_networks=(ipaddress.ip_network("10.0.0.0/8"),))
    assert check_url("http://10.1.2.3:9090", private).host == "10.1.2.3"
    with pytest.raises(OutboundRefused, match="private or internal"):
        check_url("http://192.168.1.20:9090", private)


def test_no_setting_reopens_link_local_metadata_or_loopback():
    everything = OutboundPolicy(
        allowed_networks=(ipaddress.ip_network("0.0.0.0/0"), ipaddress.ip_network("::/0"))
    )
    for url in ("http://169.254.169.254/", "http://[fe80::1]/", "http://metadata/"):
        with pytest.raises(OutboundRefused):
            check_url(url, everything)
    with pytest.raises(OutboundRefused, match="loopback"):
        check_url("http://127.0.0.1:9090", everything)  # loopback needs its own setting


def test_the_policy_comes_from_the_settings(settings):
    settings.FLEETWISE_OUTBOUND_ALLOW_LOOPBACK = False
    settings.FLEETWISE_OUTBOUND_ALLOWED_NETWORKS = ["192.168.0.0/16"]
    assert check_url("http://192.168.1.20:9090").host == "192.168.1.20"
    with pytest.raises(OutboundRefused, match="loopback"):
        check_url("http://127.0.0.1:9090")
    settings.FLEETWISE_OUTBOUND_ALLOW_LOOPBACK = True
    assert check_url("http://127.0.0.1:9090").host == "127.0.0.1"


def test_credentials_are_cut_from_urls_shown():
    assert without_credentials("http://bob:pw@prom:9090/x") == "http://[redacted]@prom:9090/x"
    assert without_credentials("https://prom:9090/x") == "https://prom:9090/x"


def _json(status: int = 200, body: bytes = b"{}", **headers: str):
    return status, {"Content-Type": "application/json", **headers}, body


def test_a_redirect_to_another_origin_is_not_followed_and_gets_no_token():
    with StubHttpServer(lambda seen: _json(200, b"stolen")) as other:
        to_other = f"{other.url}/steal"
        with StubHttpServer(lambda seen: _json(302, b"moved", Location=to_other)) as origin:
            client = OutboundClient(
                origin.url, headers={"Authorization": "Bearer t0ken"}, policy=LOOPBACK_OK
            )
            with pytest.raises(OutboundRefused) as refused:
                client.post_form("/api/v1/query", {"query": "up"})
            client.close()
        assert origin.seen[0].headers["Authorization"] == "Bearer t0ken"
    assert other.seen == []  # never asked, so never given the token
    message = str(refused.value)
    assert "HTTP 302" in message and "not followed" in message
    assert "steal" not in message and "moved" not in message


def test_a_redirect_within_the_origin_is_followed_with_the_token():
    def respond(seen):
        if seen.path == "/old/api/v1/query":
            return _json(307, b"", Location="/new/api/v1/query")
        return _json(200, b'{"ok": true}')

    with StubHttpServer(respond) as origin:
        client = OutboundClient(
            f"{origin.url}/old", headers={"Authorization": "Bearer t0ken"}, policy=LOOPBACK_OK
        )
        answer = client.post_form("/api/v1/query", {"query": "up"})
        client.close()
    assert (answer.status, answer.body) == (200, b'{"ok": true}')
    assert [s.path for s in origin.seen] == ["/old/api/v1/query", "/new/api/v1/query"]
    assert origin.seen[1].headers["Authorization"] == "Bearer t0ken"
    assert origin.seen[1].body == b"query=up"


def test_an_answer_over_the_cap_is_refused_while_it_streams():
    """No Content-Length: 64 MiB offered in 64 KiB chunks; the client stops after 1 MiB."""
    chunk = b"x" * 65536

    def endless(seen):
        return 200, {"Content-Type": "application/json"}, (chunk for _ in range(1024))

    with StubHttpServer(endless) as server:
        client = OutboundClient(server.url, max_response_bytes=2**20, policy=LOOPBACK_OK)
        with pytest.raises(OutboundError, match=r"more than the 1 MiB allowed"):
            client.get("/big")
        client.close()
    assert server.sent < 32 * 2**20  # the rest was never read (socket buffers hold a few MiB)


def test_an_answer_declared_over_the_cap_is_refused_before_its_body():
    with StubHttpServer(lambda seen: _json(200, b"y" * (2 * 2**20))) as server:
        client = OutboundClient(server.url, max_response_bytes=2**20, policy=LOOPBACK_OK)
        with pytest.raises(OutboundError, match="more than the 1 MiB allowed"):
            client.get("/declared")
        client.close()


def test_a_refused_address_is_never_contacted(settings):
    """Checked at each request too: a URL saved while loopback was allowed is refused now."""
    with StubHttpServer(lambda seen: _json()) as server:
        client = OutboundClient(server.url, policy=STRICT)
        with pytest.raises(OutboundRefused, match="loopback"):
            client.get("/api/v1/query")
    assert server.seen == []


def test_the_request_goes_to_the_address_that_was_checked(monkeypatch):
    """A name that resolves elsewhere after the check (DNS rebinding) is not looked up again:
    the connection goes to the checked address, the Host header names the host."""
    real = socket.getaddrinfo
    answers = iter(["127.0.0.1"])

    def rebinding(host, *args, **kwargs):
        if host == "prometheus.test":
            # First the checked answer, then an address the policy would refuse.
            return real(next(answers, "10.9.9.9"), *args, **kwargs)
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    with StubHttpServer(lambda seen: _json(200, b"{}")) as server:
        client = OutboundClient(f"http://prometheus.test:{server.port}", policy=LOOPBACK_OK)
        assert client.get("/api/v1/status/buildinfo").status == 200
        client.close()
    assert server.seen[0].headers["Host"] == f"prometheus.test:{server.port}"


def test_an_unreachable_target_is_a_fixed_description(settings):
    with StubHttpServer(lambda seen: _json()) as server:
        url = server.url
    client = OutboundClient(url, retries=0, timeout_s=5, policy=LOOPBACK_OK)
    with pytest.raises(OutboundError) as failed:
        client.get("/")
    assert str(failed.value) == f"{url} is unreachable (could not connect)."

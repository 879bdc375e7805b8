"""Outbound HTTP by policy: the one client for every source Fleetwise queries.

A source URL (Prometheus today, slurmrestd tomorrow) is typed in by an admin and fetched by a
worker inside the site's network; unchecked, it reaches cloud metadata, loopback services and
private hosts (SSRF). Every URL, when it is saved (:func:`check_url`) and again at each
request (:class:`OutboundClient`):

* is http or https, without credentials (tokens live in encrypted fields);
* resolves to addresses that are all allowed, literal forms (``0x7f000001``, ``2130706433``,
  ``0177.0.0.1``) normalised first: never link-local or a cloud metadata address, loopback
  only with ``FLEETWISE_OUTBOUND_ALLOW_LOOPBACK``, other non-public addresses only inside
  ``FLEETWISE_OUTBOUND_ALLOWED_NETWORKS``.

A request then connects to the very address it checked (no second lookup in between), follows
redirects within the same origin only (the bearer token never leaves it), reads the answer in
chunks up to a size cap, and fails with :class:`OutboundError`, whose text is a fixed
description and at most a status code: never the target's body.
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import SplitResult, urlencode, urljoin, urlsplit

import urllib3
from urllib3.exceptions import (
    ConnectTimeoutError,
    DecodeError,
    HTTPError,
    MaxRetryError,
    NewConnectionError,
    ProtocolError,
    ReadTimeoutError,
    SSLError,
)
from urllib3.util.retry import Retry

logger = logging.getLogger(__name__)

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

SCHEMES = ("http", "https")
DEFAULT_PORTS = {"http": 80, "https": 443}
# Cloud instance metadata services, by name and by address (always refused).
METADATA_HOSTNAMES = frozenset(
    {
        "metadata", "metadata.google.internal", "metadata.goog", "instance-data",
        "instance-data.ec2.internal", "metadata.azure.internal", "metadata.tencentyun.com",
    }
)  # fmt: skip
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in ("169.254.169.254", "169.254.170.2", "100.100.100.200", "fd00:ec2::254")
)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
# Dotted, hex, octal and bare-number IPv4 forms that inet_aton (and getaddrinfo) accept.
_IPV4_LIKE = re.compile(r"^(0x[0-9a-f]*|[0-9]+)(\.(0x[0-9a-f]*|[0-9]+)){0,3}$", re.I)
MAX_REDIRECTS = 3
CHUNK_BYTES = 64 * 1024
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
CREDENTIALS_MESSAGE = (
    "Do not put a user name or password in the URL: enter a bearer token in the token field "
    "(it is stored encrypted)."
)


class OutboundError(Exception):
    """A request that could not be made or answered usably: ``url`` (without credentials) and
    a fixed ``description`` ("is unreachable (timed out)", "answered HTTP 500", …)."""

    def __init__(self, url: str, description: str, status: int | None = None):
        super().__init__(f"{url} {description}")
        self.url, self.description, self.status = url, description, status


class OutboundRefused(OutboundError):
    """The URL, or an address its host resolves to, is not allowed by the policy."""


@dataclass(frozen=True)
class OutboundPolicy:
    """Which addresses a request may reach besides public ones."""

    allow_loopback: bool = False
    allowed_networks: tuple[IPNetwork, ...] = ()

    @classmethod
    def from_settings(cls) -> OutboundPolicy:
        from django.conf import settings
        from django.core.exceptions import ImproperlyConfigured

        names = getattr(settings, "FLEETWISE_OUTBOUND_ALLOWED_NETWORKS", ())
        try:
            networks = tuple(ipaddress.ip_network(n.strip(), strict=False) for n in names)
        except ValueError as exc:
            raise ImproperlyConfigured(f"FLEETWISE_OUTBOUND_ALLOWED_NETWORKS: {exc}") from exc
        loopback = bool(getattr(settings, "FLEETWISE_OUTBOUND_ALLOW_LOOPBACK", False))
        return cls(allow_loopback=loopback, allowed_networks=networks)


@dataclass(frozen=True)
class Target:
    """A checked URL: its parts and the addresses it may be reached at."""

    scheme: str
    host: str
    port: int
    path: str
    addresses: tuple[IPAddress, ...]

    @property
    def origin(self) -> tuple[str, str, int]:
        return (self.scheme, self.host, self.port)

    @property
    def host_header(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"


def without_credentials(url: str) -> str:
    """``url`` with any ``user:password@`` replaced by ``[redacted]@`` (for messages and logs)."""
    return re.sub(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)[^/?#@]*@", r"\1[redacted]@", url.strip())


def literal_address(host: str) -> IPAddress | None:
    """The address a literal host stands for (every IPv4 spelling inet_aton takes), else None."""
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if _IPV4_LIKE.match(host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def _embedded_ipv4(address: IPAddress) -> IPAddress:
    """The IPv4 address inside an IPv4-mapped, 6to4 or NAT64 IPv6 address (checked as such)."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address.sixtofour is not None:
            return address.sixtofour
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return address


def address_problem(address: IPAddress, policy: OutboundPolicy) -> str | None:
    """Why ``address`` may not be reached under ``policy``, or None."""
    inner = _embedded_ipv4(address)
    if address in METADATA_ADDRESSES or inner in METADATA_ADDRESSES:
        return "a cloud metadata address"
    if inner.is_link_local:
        return "a link-local address"
    if inner.is_loopback:
        return None if policy.allow_loopback else "a loopback address (not allowed here)"
    if inner.is_multicast or inner.is_unspecified or inner.is_reserved:
        return "not a unicast address"
    if any(inner in n or address in n for n in policy.allowed_networks):
        return None
    if not inner.is_global:
        return "a private or internal address (not in the allowed networks)"
    return None


def split_url(url: str) -> SplitResult:
    """The URL's parts, or OutboundRefused when it is not an http(s) URL without credentials."""
    shown = without_credentials(url)
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise OutboundRefused(shown, "holds spaces or control characters.")
    parts = urlsplit(url)
    if parts.scheme.lower() not in SCHEMES:
        raise OutboundRefused(shown, "is not an http:// or https:// URL.")
    if "@" in parts.netloc:
        raise OutboundRefused(shown, "holds credentials. " + CREDENTIALS_MESSAGE)
    try:
        parts.port  # noqa: B018 - raises on a port out of range or not a number
    except ValueError as exc:
        raise OutboundRefused(shown, "has an invalid port.") from exc
    if not parts.hostname:
        raise OutboundRefused(shown, "names no host.")
    return parts


def resolve(host: str, port: int) -> tuple[IPAddress, ...]:
    """The addresses of ``host``: the literal one, or every one getaddrinfo gives."""
    literal = literal_address(host)
    if literal is not None:
        return (literal,)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError):
        return ()
    found = (ipaddress.ip_address(str(info[4][0]).split("%", 1)[0]) for info in infos)
    return tuple(dict.fromkeys(found))


def validate_base_url(value: str, *, what: str) -> None:
    """A source's base URL, http(s)://host[:port][/prefix], that the policy lets a worker
    reach: checked when saved, and again at each request. ``what`` names the expected URL,
    e.g. "the Prometheus base URL, e.g. https://prometheus.example.org:9090"."""
    from django.core.exceptions import ValidationError

    parts = urlsplit(value)
    if parts.query or parts.fragment:
        raise ValidationError("The base URL takes no query or fragment.")
    try:
        check_url(value)
    except OutboundRefused as exc:
        raise ValidationError(f"This URL {exc.description} Enter {what}.") from exc


def check_url(url: str, policy: OutboundPolicy | None = None) -> Target:
    """The checked target of ``url``; OutboundRefused says why it may not be requested."""
    policy = policy or OutboundPolicy.from_settings()
    parts = split_url(url)
    shown = without_credentials(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".").lower()
    port = parts.port or DEFAULT_PORTS[scheme]
    if host in METADATA_HOSTNAMES or host.endswith(".metadata.google.internal"):
        raise OutboundRefused(shown, "names a cloud metadata service.")
    addresses = resolve(host, port)
    if not addresses:
        raise OutboundRefused(shown, f"names a host that does not resolve here ({host}).")
    for address in addresses:
        problem = address_problem(address, policy)
        if problem is not None:
            raise OutboundRefused(shown, f"resolves to {address}, {problem}.")
    literal = literal_address(host)
    host = str(literal) if literal is not None else host  # 0x7f000001 -> 127.0.0.1
    return Target(scheme, host, port, parts.path or "/", addresses)


def same_origin(url: str, target: Target) -> bool:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in SCHEMES or "@" in parts.netloc:
        return False
    try:
        port = parts.port or DEFAULT_PORTS[scheme]
    except ValueError:
        return False
    host = (parts.hostname or "").rstrip(".").lower()
    literal = literal_address(host)
    host = str(literal) if literal is not None else host
    return (scheme, host, port) == target.origin


@dataclass
class Answer:
    """A response read in full (within the cap): status, headers and body bytes."""

    status: int
    headers: Mapping[str, str]
    body: bytes


def _failure(exc: Exception) -> str:
    """A fixed description of why a connection failed (never the exception's own text)."""
    reason = exc.reason if isinstance(exc, MaxRetryError) else exc
    if isinstance(reason, NewConnectionError | ConnectionError):  # before: it is a timeout too
        return "could not connect"
    if isinstance(reason, ConnectTimeoutError | ReadTimeoutError | TimeoutError):
        return "timed out"
    if isinstance(reason, SSLError):
        return "TLS handshake or certificate check failed"
    if isinstance(reason, ProtocolError):
        return "connection broken"
    return type(reason).__name__


@dataclass
class OutboundClient:
    """Requests to one base URL (and paths below it), by policy; see the module's docstring."""

    base_url: str
    headers: Mapping[str, str] = field(default_factory=dict)
    timeout_s: float = 30.0
    retries: int = 3
    max_response_bytes: int = 128 * 2**20
    policy: OutboundPolicy | None = None
    shown_url: str = field(default="", init=False)
    _pools: dict[tuple[str, str, int, str], urllib3.HTTPConnectionPool] = field(
        default_factory=dict, init=False, repr=False
    )

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")
        self.shown_url = without_credentials(self.base_url)
        if self.policy is None:
            self.policy = OutboundPolicy.from_settings()

    def close(self) -> None:
        for pool in self._pools.values():
            pool.close()
        self._pools.clear()

    def post_form(self, path: str, fields: Mapping[str, object]) -> Answer:
        body = urlencode({k: str(v) for k, v in fields.items()}).encode()
        form = {"Content-Type": "application/x-www-form-urlencoded"}
        return self.request("POST", path, body=body, headers=form)

    def get(self, path: str, params: Mapping[str, object] | None = None) -> Answer:
        query = f"?{urlencode({k: str(v) for k, v in params.items()})}" if params else ""
        return self.request("GET", path + query)

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Answer:
        """One request to base URL + ``path``; same-origin redirects followed, others refused."""
        headers = headers or {}
        url = self.base_url + path
        target = check_url(url, self.policy)
        for _ in range(MAX_REDIRECTS + 1):
            answer = self._send(target, method, url, body, headers)
            if answer.status not in REDIRECT_STATUSES:
                return answer
            location = urljoin(url, answer.headers.get("Location", ""))
            if not same_origin(location, target):
                logger.warning(
                    "%s redirected to another origin (%s): not followed",
                    self.shown_url, without_credentials(location)[:200],
                )  # fmt: skip
                raise OutboundRefused(
                    self.shown_url,
                    f"answered HTTP {answer.status}, a redirect to another address (not followed).",
                    answer.status,
                )
            url = location
            target = check_url(url, self.policy)  # the same origin, resolved again
        raise OutboundError(self.shown_url, "redirected too many times.")

    def _pool(self, target: Target, address: IPAddress) -> urllib3.HTTPConnectionPool:
        key = (target.scheme, target.host, target.port, str(address))
        if key not in self._pools:
            retry = Retry(
                total=self.retries, connect=self.retries, read=self.retries,
                status=self.retries, redirect=False, backoff_factor=0.5,
                status_forcelist=(502, 503, 504), allowed_methods=("GET", "POST"),
                raise_on_status=False, raise_on_redirect=False,
            )  # fmt: skip
            timeout = urllib3.Timeout(connect=self.timeout_s, read=self.timeout_s)
            if target.scheme == "https":
                # TLS to the checked address, with SNI and the certificate checked for the name.
                name = None if literal_address(target.host) else target.host
                self._pools[key] = urllib3.HTTPSConnectionPool(
                    str(address), target.port, timeout=timeout, retries=retry,
                    cert_reqs="CERT_REQUIRED", server_hostname=name or str(address),
                    assert_hostname=name or str(address),
                )  # fmt: skip
            else:
                self._pools[key] = urllib3.HTTPConnectionPool(
                    str(address), target.port, timeout=timeout, retries=retry
                )
        return self._pools[key]

    def _send(
        self, target: Target, method: str, url: str, body: bytes | None, extra: Mapping[str, str]
    ) -> Answer:
        parts = urlsplit(url)
        path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        headers = {**self.headers, **extra, "Host": target.host_header}
        headers.setdefault("Accept-Encoding", "gzip")
        failure = "could not connect"
        for address in target.addresses:
            try:
                response = self._pool(target, address).urlopen(
                    method, path, body=body, headers=headers, redirect=False,
                    preload_content=False, assert_same_host=False,
                )  # fmt: skip
            except (HTTPError, OSError) as exc:
                failure = _failure(exc)
                continue
            return self._read(response)
        raise OutboundError(self.shown_url, f"is unreachable ({failure}).")

    def _read(self, response: urllib3.BaseHTTPResponse) -> Answer:
        """The body in chunks, refused past ``max_response_bytes`` (declared or counted)."""
        cap = self.max_response_bytes
        too_large = f"answered more than the {cap / 2**20:g} MiB allowed for one answer."
        complete = False
        try:
            declared = int(response.headers.get("Content-Length") or 0)
            if declared > cap:
                raise OutboundError(self.shown_url, too_large, response.status)
            body = bytearray()
            for chunk in response.stream(CHUNK_BYTES, decode_content=True):
                body += chunk
                if len(body) > cap:
                    raise OutboundError(self.shown_url, too_large, response.status)
            complete = True
        except (DecodeError, ValueError) as exc:
            raise OutboundError(self.shown_url, "answered a malformed response.") from exc
        except (HTTPError, OSError) as exc:
            raise OutboundError(self.shown_url, f"is unreachable ({_failure(exc)}).") from exc
        finally:
            if not complete:
                response.close()  # the rest is never read: the connection is not reused
            response.release_conn()
        return Answer(response.status, dict(response.headers), bytes(body))

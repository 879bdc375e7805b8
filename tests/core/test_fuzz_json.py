"""A fuzz pass over every JSON endpoint (issue #28): nested JSON, control characters and
extreme values give a 4xx, never a 5xx.

The routes come from the URL resolver (as the authorization matrix finds them), not from a
list kept here: a new API route is fuzzed the day it is added. Each write method of each
route gets a fixed set of hostile bodies as an administrator (so the role check passes and
the body is read); the estimates also as a viewer. Bodies are built from the route's
serializer fields where the view names one, so the hostile value reaches field validation
and not only the parser. No randomness: the same requests every run (about 700, seconds).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

pytestmark = pytest.mark.django_db

API_PREFIX = "api/v1/"
# The schema and docs pages take no body; the spreadsheet link is GET only.
SKIPPED = ("api/v1/schema/", "api/v1/docs/", "api/v1/redoc/")
WRITE_METHODS = ("post", "put", "patch")
CONTROL_TEXT = "a\nb\r\tc\x00d\x1b[31m\x85e\u2028f\u202eg\u2066h\u200bi\ufeffj"
GENERIC_KEYS = ("name", "team", "url", "cluster", "site", "pool", "inputs", "workload", "day")


def deep_array(levels: int) -> str:
    return "[" * levels + "]" * levels


def deep_object(levels: int) -> str:
    return '{"a": ' * levels + "1" + "}" * levels


# JSON text of hostile values: each goes into every field in turn (text, not Python objects,
# so 1e400 and a 400-digit integer reach the parser as a client would send them).
HOSTILE_VALUES = [
    json.dumps(CONTROL_TEXT),
    "-1e400",
    "1" + "0" * 400,
    "1e-400",
    str(2**64),
    deep_array(40),
    deep_object(40),
    json.dumps({"nested": [CONTROL_TEXT, {"x": [1e308, -1e308]}]}),
]
# Whole bodies: nesting far beyond any limit (the decoder's own recursion limit included).
HOSTILE_BODIES = [deep_array(5000), deep_object(3000), "[" * 100_000]


def api_routes() -> Iterator[tuple[str, URLPattern]]:
    """(route, pattern) of every API route, the format-suffix twins left out."""

    def walk(patterns, prefix: str) -> Iterator[tuple[str, URLPattern]]:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                yield prefix + str(pattern.pattern), pattern

    for route, pattern in walk(get_resolver().url_patterns, ""):
        if route.startswith(API_PREFIX) and "format" not in route and not route.startswith(SKIPPED):
            yield route, pattern


def write_methods(pattern: URLPattern) -> list[str]:
    actions = getattr(pattern.callback, "actions", None)
    if actions is not None:
        return [method for method in WRITE_METHODS if method in actions]
    view_class = getattr(pattern.callback, "view_class", None) or getattr(
        pattern.callback, "cls", None
    )
    return [method for method in WRITE_METHODS if hasattr(view_class, method)]


PK = "(?P<pk>[^/.]+)"


def concrete_path(client: APIClient, route: str) -> str:
    """The route with its parameters filled: the first object of its list where there is one
    (so the body reaches validation), else 1 (a 404 is a fine answer too)."""
    text = route
    if PK in text:
        text = text.replace(PK, str(first_id(client, "/" + text.split(PK)[0])))
    for name in ("<int:pk>", "<str:task_id>", "<str:token>"):
        text = text.replace(name, "1")
    text = text.replace("^", "").replace("$", "")
    assert "<" not in text and "(?P" not in text, f"unfilled parameter in {route}"
    return "/" + text


def first_id(client: APIClient, list_path: str) -> int:
    listing = client.get(list_path.replace("^", ""), {"page_size": 1})
    rows = listing.json().get("results", []) if listing.status_code == 200 else []
    return rows[0]["id"] if rows and "id" in rows[0] else 1


def field_names(pattern: URLPattern) -> list[str]:
    """The writable fields of the view's serializer, if it names one, else common keys."""
    view_class = getattr(pattern.callback, "cls", None)
    serializer_class = getattr(view_class, "serializer_class", None)
    names: list[str] = []
    if serializer_class is not None:
        try:
            fields = serializer_class().fields
        except Exception:  # a serializer that needs a request or an instance to build
            fields = {}
        names = [name for name, field in fields.items() if not field.read_only]
    return list(dict.fromkeys([*names, *GENERIC_KEYS]))


def bodies_for(pattern: URLPattern) -> list[str]:
    """One body per hostile value, that value in every field at once (a serializer checks
    every field and names each error), then the whole-body nestings."""
    keys = field_names(pattern)
    every_field = [
        "{" + ", ".join(f"{json.dumps(key)}: {value}" for key in keys) + "}"
        for value in HOSTILE_VALUES
    ]
    return [*every_field, *HOSTILE_BODIES]


def send(client: APIClient, method: str, path: str, body: str) -> int:
    try:
        response = client.generic(method.upper(), path, body, content_type="application/json")
    except Exception:  # the test client re-raises what the view raised: that is the 500
        return 500
    return response.status_code


def server_errors(client: APIClient, routes) -> tuple[list[str], int]:
    failures, sent = [], 0
    for route, pattern in routes:
        path = concrete_path(client, route)
        for method in write_methods(pattern):
            for body in bodies_for(pattern):
                status = send(client, method, path, body)
                sent += 1
                if status >= 500:
                    failures.append(f"{method.upper()} {path} {body[:80]!r}: {status}")
    return failures, sent


@pytest.fixture
def admin_api(client_for, fleet_admin, demo_fleet):
    return client_for(fleet_admin)


def test_the_routes_are_found_from_the_resolver():
    routes = dict(api_routes())
    writable = {route for route, pattern in routes.items() if write_methods(pattern)}
    # A few known ones, so a broken walk cannot pass with nothing to fuzz.
    assert {"api/v1/^sites/$", "api/v1/estimates/training/", "api/v1/^alert-rules/$"} <= writable
    assert len(writable) > 35


def test_no_hostile_json_body_gets_a_server_error(admin_api):
    failures, sent = server_errors(admin_api, api_routes())
    assert sent > 600, sent
    assert not failures, "\n".join(failures[:40])


def test_a_viewers_estimates_refuse_hostile_json_too(client_for, viewer):
    estimates = [(r, p) for r, p in api_routes() if r.startswith("api/v1/estimates/")]
    assert len(estimates) >= 4
    failures, sent = server_errors(client_for(viewer), estimates)
    assert sent > 40
    assert not failures, "\n".join(failures[:40])


@pytest.mark.parametrize("body", HOSTILE_BODIES, ids=["array", "object", "unclosed"])
def test_deep_nesting_is_a_400_naming_the_depth(admin_api, body):
    response = admin_api.generic(
        "POST", "/api/v1/estimates/training/", body, content_type="application/json"
    )
    assert response.status_code == 400
    assert "nested deeper than 32 levels" in response.json()["detail"]

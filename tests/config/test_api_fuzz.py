"""Property-based fuzz of every API input: no 500 and no answer slower than 2 s.

1. Every numeric field of every JSON body (POST, PUT, PATCH; nested objects and list items
   too, found by walking the OpenAPI schema) gets each hostile value, as a JSON number or
   literal (1e308, 1e-320, 2**63, NaN, Infinity, 1e400) and as a string, inside a body that is
   otherwise valid where we have one.
2. Every query parameter of every GET gets each hostile value as a string.
3. Hypothesis draws whole training-estimate and plan bodies whose numbers all come from the
   hostile values or sane ones at once; schemathesis sends bodies generated from the schema
   (which carries the ranges of engine.limits) to every write operation.
Examples are derandomized, so the budget is fixed (about a minute on two cores).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error

from tests.support.openapi import validated_schema

pytestmark = pytest.mark.django_db
# "Costs little" is this thread's CPU time (the test client runs the view here), so a busy
# machine does not fail it; the wall-clock backstop still catches work hidden in the database.
SLOW_S = 2.0
WALL_BACKSTOP_S = 20.0
PLACEHOLDER = "__hostile__"
# JSON text put in place of a field's value: numbers and literals, then the same as strings.
HOSTILE_TOKENS = [
    "1e308",
    "-1e308",
    "1e-320",
    str(2**63),
    "1e400",
    "NaN",
    "Infinity",
    *(json.dumps(text) for text in ("1e308", "1e-320", str(2**63), "NaN", "Infinity")),
]
HOSTILE_STRINGS = ["1e308", "1e-320", str(2**63), "NaN", "-Infinity", "99999999999999999999"]
TOKENS_PER_FIELD = 2
SKIPPED_PATHS = ("/api/v1/export/", "/api/v1/schema/", "/api/v1/docs/", "/api/v1/redoc/")
MULTIPART_ONLY = "/api/v1/usage-records/import/"


@pytest.fixture(scope="module")
def openapi() -> dict:
    return validated_schema()


@pytest.fixture
def admin_api(client_for, fleet_admin, demo_fleet):
    return client_for(fleet_admin)


def resolve(schema: dict, openapi: dict) -> dict:
    while "$ref" in schema:
        schema = openapi["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def numeric_paths(schema: dict, openapi: dict, prefix: tuple = (), depth: int = 0) -> Iterator:
    """Paths (keys and list indexes) to every number or integer in a request body schema."""
    schema = resolve(schema, openapi)
    if depth > 5:
        return
    kinds = [schema, *schema.get("oneOf", []), *schema.get("anyOf", []), *schema.get("allOf", [])]
    for kind in kinds:
        kind = resolve(kind, openapi)
        if kind.get("type") in ("number", "integer") and prefix:
            yield prefix
            return
    for kind in kinds:
        kind = resolve(kind, openapi)
        for name, child in kind.get("properties", {}).items():
            if not child.get("readOnly"):
                yield from numeric_paths(child, openapi, (*prefix, name), depth + 1)
        if kind.get("type") == "array" and "items" in kind:
            yield from numeric_paths(kind["items"], openapi, (*prefix, 0), depth + 1)


def with_value(body, path: tuple, value):
    """A copy of `body` with `value` at `path`, creating objects and lists on the way."""
    if not path:
        return value
    key, rest = path[0], path[1:]
    if isinstance(key, int):
        items = list(body) if isinstance(body, list) and body else [{}]
        items[0] = with_value(items[0], rest, value)
        return items
    base = dict(body) if isinstance(body, dict) else {}
    base[key] = with_value(base.get(key, {}), rest, value)
    return base


def base_bodies() -> dict[str, dict]:
    """Bodies valid on the demo fleet, so injected values reach the deeper checks."""
    from inventory.models import Site
    from tests.support.builders import plan_payload

    training = {"model_params": 7e9, "tokens": 1e12, "accelerator": "H100 SXM5 80GB", "cards": 64}
    site = Site.objects.order_by("pk").first()
    return {
        "/api/v1/estimates/training/": training,
        "/api/v1/estimates/effective-time/": {"cards": 1024},
        "/api/v1/estimates/pool/": {"members": [{"accelerator": "H100 SXM5 80GB", "cards": 8}]},
        "/api/v1/estimates/utilization/": {"accelerator": "H100 SXM5 80GB", "cards": 8},
        "/api/v1/plans/": plan_payload(),
        "/api/v1/sites/": {"name": "Fuzz DC", "tariff_per_kwh": 0.1, "currency": "EUR"},
        "/api/v1/clusters/": {"site": site.pk, "name": "fuzz"},
    }


def first_id(client, path: str) -> int:
    """An existing object for a detail path (1 when the list is empty: a 404 is fine too)."""
    listing = client.get(path.split("{id}")[0], {"page_size": 1})
    rows = listing.json().get("results", []) if listing.status_code == 200 else []
    return rows[0]["id"] if rows and "id" in rows[0] else 1


class Raised:
    """What the test client gives back when the view raised (it re-raises instead of a 500)."""

    status_code = 500

    def __init__(self, exc: Exception) -> None:
        self.content = repr(exc).encode()


class Cost:
    """CPU seconds of this thread and wall seconds of a block."""

    def __enter__(self) -> Cost:
        self.cpu_started, self.wall_started = time.thread_time(), time.perf_counter()
        return self

    def __exit__(self, *exc_info) -> None:
        self.cpu_s = time.thread_time() - self.cpu_started
        self.wall_s = time.perf_counter() - self.wall_started

    @property
    def too_much(self) -> bool:
        return self.cpu_s > SLOW_S or self.wall_s > WALL_BACKSTOP_S

    def __str__(self) -> str:
        return f"{self.cpu_s:.1f} s CPU, {self.wall_s:.1f} s wall"


def send(client, method: str, path: str, text: str, etag: str | None = None):
    extra = {"HTTP_IF_MATCH": etag} if etag else {}
    with Cost() as cost:
        try:
            response = client.generic(method, path, text, content_type="application/json", **extra)
        except Exception as exc:  # a raised view is the 500 we are looking for
            response = Raised(exc)
    return response, cost


def rotating(values: list[str], index: int) -> list[str]:
    """TOKENS_PER_FIELD of `values` for the index-th field, rotating: every field gets
    several, and every value reaches every operation with enough fields (time budget)."""
    start = index * TOKENS_PER_FIELD
    return [values[(start + k) % len(values)] for k in range(TOKENS_PER_FIELD)]


def write_operations(openapi: dict) -> Iterator[tuple[str, str, dict]]:
    for path, operations in openapi["paths"].items():
        if path.startswith(SKIPPED_PATHS) or path == MULTIPART_ONLY:
            continue
        for method, operation in operations.items():
            content = operation.get("requestBody", {}).get("content", {})
            if method in ("post", "put", "patch") and "application/json" in content:
                yield method, path, content["application/json"]["schema"]


def test_hostile_numbers_in_every_body_field(admin_api, openapi):
    bases = base_bodies()
    failures, sent = [], 0
    for method, path, schema in write_operations(openapi):
        url, etag = path, None
        if "{id}" in path:
            url = path.replace("{id}", str(first_id(admin_api, path)))
            etag = admin_api.get(url).get("ETag")
        base = bases.get(path.replace("{id}/", ""), {}) if method != "patch" else {}
        for index, field in enumerate(dict.fromkeys(numeric_paths(schema, openapi))):
            body = json.dumps(with_value(base, field, PLACEHOLDER))
            for token in rotating(HOSTILE_TOKENS, index):
                text = body.replace(json.dumps(PLACEHOLDER), token)
                response, cost = send(admin_api, method.upper(), url, text, etag)
                sent += 1
                if response.status_code >= 500 or cost.too_much:
                    failures.append(
                        f"{method.upper()} {url} {field}={token}: {response.status_code} "
                        f"in {cost} {response.content[:120]!r}"
                    )
    assert sent > 600, sent  # the walk found the numeric fields
    assert not failures, "\n".join(failures[:40])


def test_hostile_strings_in_every_query_parameter(admin_api, openapi):
    failures, sent = [], 0
    for path, operations in openapi["paths"].items():
        operation = operations.get("get")
        if operation is None or path.startswith(SKIPPED_PATHS):
            continue
        url = path.replace("{id}", str(first_id(admin_api, path))) if "{id}" in path else path
        names = [p["name"] for p in operation.get("parameters", []) if p["in"] == "query"]
        for index, name in enumerate(names):
            if name == "format":
                continue  # a format is a renderer choice, covered by the export tests
            for value in rotating(HOSTILE_STRINGS, index):
                with Cost() as cost:
                    response = admin_api.get(url, {name: value})
                sent += 1
                if response.status_code >= 500 or cost.too_much:
                    failures.append(f"GET {url}?{name}={value}: {response.status_code} {cost}")
    assert sent > 150, sent
    assert not failures, "\n".join(failures[:40])


HOSTILE_VALUES = [1e308, -1e308, 1e-320, 2**63, "NaN", "Infinity", "1e308", str(2**63)]
number = st.sampled_from(HOSTILE_VALUES) | st.floats(1, 1e6) | st.integers(1, 4096)
WORKLOAD_NUMBERS = ("model_params", "tokens", "seq_len", "global_batch_sequences", "micro_batch")
ESTIMATE_NUMBERS = (
    *WORKLOAD_NUMBERS[:4],
    *("cards", "pue", "tariff_per_kwh", "amortization_years", "capital_cost_per_card", "mfu"),
)
SHAPE_NUMBERS = ("layers", "hidden_size", "attention_heads")


def _post(client, path: str, body: dict):
    response, cost = send(client, "POST", path, json.dumps(body))
    assert response.status_code < 500, (body, response.content[:300])
    assert not cost.too_much, (body, str(cost))


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(values=st.fixed_dictionaries(dict.fromkeys(ESTIMATE_NUMBERS, number)))
def test_every_estimate_number_hostile_at_once(admin_api, values):
    body = {**base_bodies()["/api/v1/estimates/training/"], **values}
    _post(admin_api, "/api/v1/estimates/training/", body)


@settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(values=st.fixed_dictionaries(dict.fromkeys(WORKLOAD_NUMBERS + SHAPE_NUMBERS, number)))
def test_every_workload_number_hostile_at_once(admin_api, values):
    body = base_bodies()["/api/v1/plans/"]
    _post(admin_api, "/api/v1/plans/", {**body, "workload": {**body["workload"], **values}})


@pytest.fixture
def write_schema(openapi, fleet_admin, demo_fleet):
    from rest_framework.authtoken.models import Token

    from config.wsgi import application

    schema = schemathesis.openapi.from_dict(openapi)
    schema.app = application
    token = Token.objects.create(user=fleet_admin).key
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield (
        token,
        schema.include(method=["POST", "PUT", "PATCH"]).exclude(
            path_regex=r"^/api/v1/(export/|usage-records/import/)"
        ),
    )
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


def test_schemathesis_bodies_within_the_bounds(write_schema):
    token, schema = write_schema
    headers = {"Authorization": f"Token {token}"}
    failures, tested = [], 0
    for result in schema.get_all_operations():
        operation = result.ok()

        @given(case=operation.as_strategy())
        @settings(
            max_examples=2,
            deadline=None,
            database=None,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
        def check(case):
            with Cost() as cost:
                response = case.call(headers=headers)
            case.validate_response(response, checks=[not_a_server_error])
            assert not cost.too_much, (case.path, str(cost))

        try:
            check()
        except BaseException as exc:  # schemathesis raises a (Base)ExceptionGroup
            if isinstance(exc, KeyboardInterrupt | SystemExit):
                raise
            failures.append(f"{operation.label}: {exc}")
        tested += 1
    assert tested > 30, tested
    assert not failures, "\n\n".join(failures)

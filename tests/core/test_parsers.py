"""The API's JSON parser (core/parsers.py): numbers beyond a double and nesting beyond
MAX_JSON_DEPTH are a ParseError (400), whatever the endpoint; ordinary bodies pass unchanged."""

from __future__ import annotations

import io
import json

import pytest
from django.core.exceptions import ValidationError
from rest_framework.exceptions import ParseError

from core.parsers import MAX_JSON_DEPTH, FiniteJSONParser, deeper_than


def parse(text: str):
    return FiniteJSONParser().parse(io.BytesIO(text.encode()), "application/json", {})


def nested(levels: int) -> str:
    """``levels`` objects and arrays inside one another: {"a": [{"a": [ … ]}]}."""
    value: object = 1
    for level in range(levels):
        value = {"a": value} if level % 2 else [value]
    return json.dumps(value)


def test_an_ordinary_body_parses_unchanged():
    body = {"name": "Oslo DC3", "pue": 1.3, "cards": 64, "sites": [{"name": "x", "pue": 1.2}]}
    assert parse(json.dumps(body)) == body


def test_nesting_up_to_the_limit_passes_and_one_more_level_is_refused():
    assert MAX_JSON_DEPTH == 32
    assert parse(nested(32)) is not None
    with pytest.raises(ParseError, match="nested deeper than 32 levels"):
        parse(nested(33))


@pytest.mark.parametrize("text", ["[" * 5000 + "]" * 5000, "[" * 100_000, '{"a": ' * 20_000])
def test_nesting_past_the_decoders_own_recursion_is_a_parse_error(text):
    with pytest.raises(ParseError, match="nested deeper than 32 levels"):
        parse(text)


@pytest.mark.parametrize("number", ["1e400", "-1e400", "1" + "0" * 400, "-" + "9" * 350])
def test_numbers_beyond_a_double_are_a_parse_error(number):
    with pytest.raises(ParseError, match="out of range"):
        parse(f'{{"cards": {number}}}')


def test_large_numbers_a_double_holds_pass():
    assert parse('{"a": 1e308, "b": 123456789012345678901234567890, "c": 1e-400}') == {
        "a": 1e308,
        "b": 123456789012345678901234567890,
        "c": 0.0,
    }


def test_deeper_than_counts_objects_and_arrays_not_scalars():
    assert not deeper_than(5, 0)
    assert not deeper_than({"a": [1, 2]}, 2)
    assert deeper_than({"a": [{}]}, 2)
    assert not deeper_than([[[]]], 3) and deeper_than([[[[]]]], 3)
    # Breadth is not depth: ten thousand siblings at one level.
    assert not deeper_than([[] for _ in range(10_000)], 2)


# -- the same bounds in the pages' JSON boxes ---------------------------------------------------


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("[" * 5000 + "]" * 5000, "nested deeper than 32 levels"),
        (nested(33), "nested deeper than 32 levels"),
        ('{"pue": 1e400}', "out of range"),
        ('{"pue": NaN}', "NaN"),
        ('{"pue": 1.2', "Expecting"),
    ],
)
def test_a_forms_json_box_refuses_what_the_api_refuses(text, why):
    from core.parsers import BoundedJSONFormField

    field = BoundedJSONFormField(required=False)
    with pytest.raises(ValidationError) as raised:
        field.clean(text)
    assert raised.value.messages[0].startswith("Enter valid JSON: ")
    assert why in raised.value.messages[0]
    assert field.clean('{"pue": 1.2, "mtbf_card_hours": [1, 2]}') == {
        "pue": 1.2,
        "mtbf_card_hours": [1, 2],
    }


@pytest.mark.django_db
def test_the_site_page_answers_deep_assumptions_with_a_form_error(client, planner):
    from inventory.models import Site

    client.force_login(planner)
    form = {"name": "Deep", "cooling_type": "air", "assumptions": "[" * 5000 + "]" * 5000}
    response = client.post("/inventory/sites/new/", form)
    assert response.status_code == 200  # the form again, with its error
    assert "nested deeper than 32 levels" in response.content.decode()
    assert not Site.objects.filter(name="Deep").exists()


@pytest.mark.django_db
def test_the_inventory_import_reads_assumptions_with_the_same_bounds():
    from inventory.imports.reading import parse_text
    from inventory.imports.rows import preview_import

    deep = json.dumps(json.loads(nested(40))).replace('"', '""')
    huge, fine = '"{""mtbf_card_hours"": 1e400}"', '"{""mtbf_card_hours"": 30000}"'
    money = "0.1,EUR"  # a new site states its tariff and currency
    text = (
        f'name,tariff_per_kwh,currency,assumptions\nDeep,{money},"{deep}"\n'
        f"Huge,{money},{huge}\nFine,{money},{fine}\n"
    )
    preview = preview_import("sites", parse_text(text))
    errors = {error.row: error.message for row in preview.rows for error in row.errors}
    assert errors[2] == (
        'not valid JSON (nested deeper than 32 levels); write e.g. {"mtbf_card_hours": 30000}.'
    )
    assert errors[3].startswith("not valid JSON (the number 1e400 is out of range)")
    assert 4 not in errors

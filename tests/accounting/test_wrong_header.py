"""A usage file with the wrong header says so (expected and found columns) instead of reading
the header as a short record; the failed import's banner summarises instead of repeating the
table of bad lines."""

from __future__ import annotations

import io
import re

import pytest

from accounting.models import ImportJob
from accounting.parsing.errors import UsageValidationError
from accounting.parsing.layouts import DEFAULT_SACCT_COLUMNS
from accounting.parsing.sacct import read_sacct
from tests.support.alpha_usage import SACCT_LINES, sacct_text


def _problems(text: str, **options) -> UsageValidationError:
    with pytest.raises(UsageValidationError) as caught:
        read_sacct(io.BytesIO(text.encode()), **options)
    return caught.value


@pytest.mark.parametrize(
    ("text", "options"),
    [
        ("Foo|Bar|Baz|Qux\n4211|alice|x|y\n", {"columns": DEFAULT_SACCT_COLUMNS}),
        ("Foo|Bar|Baz|Qux\n4211|alice|x|y\n", {}),
        ("Foo,Bar,Baz,Qux\n4211,alice,x,y\n", {}),
    ],
)
def test_a_wrong_header_names_the_expected_and_found_columns(text, options):
    error = _problems(text, **options)
    assert len(error.issues) == 1, str(error)
    message = str(error.issues[0])
    assert message.startswith("line 1, column header: wrong header: expected sacct columns")
    assert "JobID, Start, State, AllocTRES and End or Elapsed" in message
    assert re.search(r"found Foo,? ?Bar,? ?Baz,? ?Qux$", message)
    assert "missing field" not in str(error)


def test_data_without_a_header_still_reads_with_the_callers_columns():
    lines = sacct_text(SACCT_LINES[:2]).splitlines()[1:]  # the same records, header dropped
    frame = read_sacct(io.BytesIO("\n".join(lines).encode()), columns=DEFAULT_SACCT_COLUMNS)
    assert len(frame) >= 1


@pytest.mark.django_db
def test_the_failure_banner_gives_the_count_and_the_first_problem(client, alpha, planner):
    text = sacct_text([line.replace("COMPLETED", "EXPLODED") for line in SACCT_LINES])
    error = _problems(text)
    assert len(error.issues) > 1, str(error)
    job = ImportJob.objects.create(
        kind="sacct",
        cluster=alpha,
        source_name="bad.txt",
        status="failed",
        error=str(error),
        issues=[str(issue) for issue in error.issues],
        created_by=planner,
    )
    client.force_login(planner)
    html = client.get(f"/usage/import/{job.pk}/").content.decode()
    banner = re.search(r'<div class="message message-error" role="alert">(.*?)</div>', html, re.S)
    assert banner, html
    first = error.issues[0]
    assert f"{len(error.issues)} problems in the file; the first: line {first.line}" in banner[1]
    assert banner[1].count("unknown state") == 1  # the table below lists the rest
    assert html.count("unknown state") == len(error.issues) + 1

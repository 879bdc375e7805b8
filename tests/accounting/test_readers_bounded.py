"""Bounded usage readers: a huge line, a huge file, a never-closed quote, a sheet declared at
XFD1048576, UTF-16 and binary uploads. Each is refused with one message naming the line (or
the sheet size) and the limit, run under an address-space cap so a blow-up fails the test.
(The inventory import's readers: tests/inventory/test_readers_bounded.py.)"""

from __future__ import annotations

import io
import os
import subprocess
import sys

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from accounting import services
from accounting.models import ImportJob, UsageRecord
from accounting.parsing import UsageValidationError, iter_csv_chunks
from accounting.parsing.blocks import iter_record_blocks
from accounting.parsing.bounded import BoundedStream, ReaderLimits, configure, current_limits
from core.uploads.sniff import text_problem
from inventory.models import Cluster
from tests.support.hostile import one_far_cell_xlsx
from tests.support.memcap import REPO_ROOT, address_space_cap, run_capped

HEADER = "cluster,job_id,cards,start,end,state,accelerator_model\n"
LINE = "train-hetero,j-{i},8,2024-03-01T10:00:00Z,2024-03-01T16:00:00Z,completed,h100\n"


@pytest.fixture
def reader_limits():
    """Restore the process-wide reader limits a test (or an import) changed."""
    before = current_limits()
    yield
    configure(before)


def parse_all(data: bytes) -> list:
    return list(iter_csv_chunks(io.BytesIO(data)))


# -- the pure readers --------------------------------------------------------------------------


def test_a_long_line_is_refused_naming_the_line_and_the_limit(reader_limits):
    configure(ReaderLimits(max_line_bytes=64 * 2**10))
    data = (HEADER + LINE.format(i=1)).encode() + b"x" * 2**20 + b"\n"
    with pytest.raises(UsageValidationError) as refused:
        parse_all(data)
    assert [str(issue) for issue in refused.value.issues] == [
        "line 3, column *: line 3 is longer than the 64 KiB limit for one line"
    ]


def test_the_byte_cap_holds_while_streaming(reader_limits):
    body = "".join(LINE.format(i=i) for i in range(2000))
    configure(ReaderLimits(max_bytes=32 * 2**10))
    with pytest.raises(UsageValidationError, match="larger than the 32 KiB limit"):
        parse_all((HEADER + body).encode())
    configure(ReaderLimits(max_bytes=2**20))
    assert sum(len(chunk) for chunk in parse_all((HEADER + body).encode())) == 2000


def test_blocks_stop_at_the_byte_budget_and_keep_every_record(reader_limits):
    configure(ReaderLimits(max_line_bytes=2**10, max_block_bytes=16 * 2**10))
    text = "".join(f"{i},{'y' * 200}\n" for i in range(1000)).encode()
    blocks = list(
        iter_record_blocks(
            BoundedStream(io.BytesIO(text)), delimiter=",", quotechar='"', records_per_block=50_000
        )
    )
    assert len(blocks) > 10
    assert max(len(block.data) for block in blocks) <= 16 * 2**10
    assert sum(len(block) for block in blocks) == 1000
    assert blocks[-1].record_lines[-1] == 1000


def test_a_quote_that_never_closes_is_refused_at_the_block_budget(reader_limits):
    configure(ReaderLimits(max_line_bytes=2**10, max_block_bytes=64 * 2**10))
    data = (HEADER + LINE.format(i=1) + 'train-hetero,"j-2\n').encode() + b"short line\n" * 50_000
    with pytest.raises(UsageValidationError, match="record starting at line 3 is longer than"):
        parse_all(data)


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        ((HEADER + LINE.format(i=1)).encode("utf-16"), "UTF-16"),
        ((HEADER + LINE.format(i=1)).encode("utf-16-le"), "UTF-16"),
        ((HEADER + LINE.format(i=1)).encode("utf-32"), "UTF-32"),
        (b"\x1f\x8b\x08\x00" + os.urandom(2000), "binary: a gzip archive"),
        (bytes(range(256)) * 20, "binary"),
    ],
)
def test_a_non_text_file_is_one_message(data, kind):
    with pytest.raises(UsageValidationError) as refused:
        parse_all(data)
    assert [str(issue) for issue in refused.value.issues] == [
        f"line 1, column *: not UTF-8 text (looks like {kind})"
    ]


def test_utf8_and_a_few_legacy_accents_still_count_as_text():
    assert text_problem((HEADER + LINE.format(i=1)).encode("utf-8-sig")) is None
    assert text_problem("train-hetero,Zürich team\n".encode("latin-1") * 50) is None
    assert text_problem("Zürich;Genève;Årsta\n".encode("cp1252") * 50, legacy_8bit_ok=True) is None


@pytest.mark.parametrize("kind", ["csv", "sacct"])
def test_a_300_mb_line_is_refused_in_a_capped_process(tmp_path, kind):
    """Realistic scale with the default limits: memory follows the line limit, not the line."""
    from tests.support.sacct_pitfalls import SACCT_HEADER, SACCT_LINES

    head = HEADER + LINE.format(i=1) if kind == "csv" else f"{SACCT_HEADER}\n{SACCT_LINES[0]}\n"
    path = tmp_path / f"huge.{kind}"
    with path.open("wb") as out:
        out.write(head.encode())
        out.write(b"train-hetero" + (b"," if kind == "csv" else b"|"))
        chunk = b"x" * 2**20
        for _ in range(300):
            out.write(chunk)
        out.write(b"\n")
    reader = "iter_csv_chunks" if kind == "csv" else "iter_sacct_chunks"
    result = run_capped(
        f"""
        from accounting.parsing import UsageValidationError, {reader}
        try:
            list({reader}({str(path)!r}))
        except UsageValidationError as exc:
            print(exc.issues[0])
        """
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == (
        "line 3, column *: line 3 is longer than the 16 MiB limit for one line"
    )


def test_peak_memory_follows_the_block_not_the_file(tmp_path):
    """120 MB of 4 KB lines in 50,000-line chunks would be one 120 MB block (and ~900 MB of
    arrays, over this cap); the block byte limit keeps the parse within 768 MiB."""
    path = tmp_path / "wide.csv"
    user = "u" * 4000
    with path.open("w") as out:
        out.write(HEADER.rstrip("\n") + ",user\n")
        for i in range(30_000):
            out.write(LINE.format(i=i).rstrip("\n") + f",{user}\n")
    result = run_capped(
        f"""
        from accounting.parsing import iter_csv_chunks
        print(sum(len(chunk) for chunk in iter_csv_chunks({str(path)!r}, chunk_lines=50_000)))
        """,
        cap_bytes=768 * 2**20,
        timeout_s=120,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "30000"


def test_a_usage_sheet_declared_at_xfd1048576_is_refused_unread():
    from accounting.parsing import iter_xlsx_chunks

    with address_space_cap(), pytest.raises(UsageValidationError) as refused:
        list(iter_xlsx_chunks(io.BytesIO(one_far_cell_xlsx(declared=True))))
    assert [str(issue) for issue in refused.value.issues] == [
        "line 1, column *: the sheet declares 16,384 columns; a usage sheet has at most 256"
    ]


# -- usage uploads: page, API and command -------------------------------------------------------


def test_utf16_and_binary_usage_uploads_are_refused_with_one_message(
    client, client_for, planner, demo_fleet
):
    cluster = Cluster.objects.get(name="train-hetero")
    utf16 = (HEADER + LINE.format(i=1)).encode("utf-16")
    for kind, content, message in [
        ("csv", utf16, "The file is not UTF-8 text (looks like UTF-16)."),
        ("sacct", b"\x1f\x8b\x08" + bytes(500), "The file is not UTF-8 text (looks like binary"),
        ("sreport", bytes(range(256)) * 8, "The file is not UTF-8 text (looks like binary)."),
    ]:
        answer = client_for(planner).post(
            "/api/v1/usage-records/import/",
            {"file": SimpleUploadedFile(f"u.{kind}", content), "kind": kind, "cluster": cluster.pk},
            format="multipart",
        )
        assert answer.status_code == 400
        assert answer.json()["file"].startswith(message)
    client.force_login(planner)
    page = client.post(
        "/usage/import/",
        {
            "file": SimpleUploadedFile("u.csv", utf16),
            "kind": "csv",
            "cluster": cluster.pk,
            "timezone": "UTC",
        },
    )
    assert "not UTF-8 text (looks like UTF-16)" in str(page.context["form"].errors["file"])
    assert not ImportJob.objects.exists()


def test_the_import_command_names_a_utf16_file_once(demo_fleet, tmp_path):
    path = tmp_path / "usage.csv"
    path.write_bytes((HEADER + LINE.format(i=1)).encode("utf-16"))
    with pytest.raises(CommandError) as refused:
        call_command(
            "import_usage", str(path), kind="csv", cluster="train-hetero", no_progress=True
        )
    assert "line 1, column *: not UTF-8 text (looks like UTF-16)" in str(refused.value)
    assert str(refused.value).count("line ") == 1


def test_a_long_line_fails_the_import_job_and_stores_nothing(demo_fleet, settings, reader_limits):
    settings.FLEETWISE_READER_MAX_LINE_BYTES = 4 * 2**10
    cluster = Cluster.objects.get(name="train-hetero")
    text = HEADER + LINE.format(i=1) + "train-hetero," + "z" * 10_000 + "\n"
    job = services.create_import_job(
        kind="csv", cluster=cluster, upload=SimpleUploadedFile("u.csv", text.encode())
    )
    services.run_import_job(job.pk, str(job.run_id))  # what the worker does
    job.refresh_from_db()
    assert job.status == "failed"
    assert job.issues == ["line 3, column *: line 3 is longer than the 4 KiB limit for one line"]
    assert UsageRecord.objects.count() == 0


def test_an_uploaded_file_is_held_to_the_upload_limit_while_read(
    demo_fleet, settings, reader_limits
):
    cluster = Cluster.objects.get(name="train-hetero")
    text = HEADER + "".join(LINE.format(i=i) for i in range(300))
    job = services.create_import_job(
        kind="csv", cluster=cluster, upload=SimpleUploadedFile("u.csv", text.encode())
    )
    settings.FLEETWISE_USAGE_UPLOAD_MAX_BYTES = 10 * 2**10  # the stored file is now too large
    services.run_import_job(job.pk, str(job.run_id))
    job.refresh_from_db()
    assert job.status == "failed"
    assert "the file is larger than the 10 KiB limit" in job.issues[0]


def test_the_upload_limit_setting_is_read_from_the_environment():
    code = "from django.conf import settings; print(settings.FLEETWISE_USAGE_UPLOAD_MAX_BYTES)"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "FLEETWISE_USAGE_UPLOAD_MAX_BYTES": "12345",
    }
    result = subprocess.run(  # our own interpreter
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert result.stdout.strip().splitlines()[-1] == "12345"


def test_the_usage_upload_limit_is_enforced_by_page_and_api(
    client, client_for, planner, demo_fleet, settings
):
    settings.FLEETWISE_USAGE_UPLOAD_MAX_BYTES = 1000
    cluster = Cluster.objects.get(name="train-hetero")
    content = (HEADER + "".join(LINE.format(i=i) for i in range(40))).encode()
    api = client_for(planner).post(
        "/api/v1/usage-records/import/",
        {"file": SimpleUploadedFile("u.csv", content), "kind": "csv", "cluster": cluster.pk},
        format="multipart",
    )
    assert api.status_code == 413
    client.force_login(planner)
    page = client.post(
        "/usage/import/",
        {
            "file": SimpleUploadedFile("u.csv", content),
            "kind": "csv",
            "cluster": cluster.pk,
            "timezone": "UTC",
        },
    )
    assert page.status_code == 400
    assert "larger than the upload limit of 1,000 bytes" in page.context["form"].errors["file"][0]
    assert not ImportJob.objects.exists()

"""Slurm's JSON job records -> usage-record chunks: ``sacct --json`` and slurmrestd's jobs.

Produce the input with, for example::

    sacct --json --allusers --allocations --starttime 2025-01-01 --endtime 2025-02-01

or slurmrestd's ``GET /slurmdb/v0.0.38/jobs?start_time=...&end_time=...`` (any data_parser
version: the same document). It is one JSON object with a ``jobs`` list (and ``meta``,
``errors``, ``warnings``); each job is read as :mod:`accounting.parsing.sacct` reads the
allocation line of the same job, so the two give the same records (same ``record_key``: a
job imported as text and then as JSON updates one record). What differs:

* Both document shapes are read: Slurm 22.05's ``openapi/dbv0.0.38`` (plain numbers,
  ``state.current`` a word) and data_parser v0.0.40 and later (23.11 on: numbers that may be
  unset as ``{"set": false, "infinite": false, "number": 0}``, ``state.current`` a list of the
  base state and its flags, of which the one Slurm's own text would print is used).
* Job ids: ``job_id`` is sacct's JobIDRaw; an array task is labelled ``<array.job_id>_
  <array.task_id>``, a het component ``<het.job_id>+<het.job_offset>``, as sacct prints them.
* GPUs come from ``tres.allocated`` (``{"type": "gres", "name": "gpu:h100", "count": 2}``),
  read with the AllocTRES rules (typed kinds, untyped remainder, MIG fractions).
* Times are Unix seconds (UTC). The record key carries Submit as sacct would print it in
  ``timezone``: give the import the zone sacct's text would have been printed in.
  ``time.elapsed`` is the duration, as Elapsed is for the text.
* Steps are ignored (one record per allocation, like ``sacct -X``): ``--allocations`` keeps
  the document small.
* The whole document streams: memory follows one job record and one chunk, not the file.
  A document that is not a Slurm jobs document, or whose ``errors`` list is not empty, is
  refused (with Slurm's own error texts).
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import io
import json
import os
import re
from collections.abc import Iterator
from typing import IO, Any

import numpy as np
import pandas as pd

from accounting.parsing.as_of import hold_running
from accounting.parsing.blocks import ParseProgress, UsageSource, open_source
from accounting.parsing.bounded import BoundedStream, Readable, size_text
from accounting.parsing.errors import (
    IssueCollector,
    LineIssue,
    TooManyIssues,
    UsageValidationError,
)
from accounting.parsing.fields import job_durations
from accounting.parsing.sacct import ChunkContext, SacctOptions, SacctStats
from accounting.parsing.schema import conform_usage_frame, empty_usage_frame
from accounting.parsing.slurm_json_job import job_row, rows_frame

SlurmJsonSource = UsageSource | bytes | bytearray | memoryview

EXPECTED_DOCUMENT = (
    "a Slurm jobs document: the JSON object `sacct --json` prints (or slurmrestd's "
    'GET /slurmdb/v0.0.NN/jobs returns), with a "jobs" list'
)
LIVE_JOBS = (
    "these are the controller's live jobs (`squeue --json`, slurmrestd's /slurm/v0.0.NN/jobs), "
    "not accounting records: export them with `sacct --json` or /slurmdb/v0.0.NN/jobs"
)
# Top-level keys of Slurm's other JSON documents -> what the file is.
OTHER_DOCUMENTS: dict[str, str] = {
    "nodes": "node records (`sinfo --json`, `scontrol show nodes --json`)",
    "partitions": "partition records (`scontrol show partitions --json`)",
    "reservations": "reservation records",
    "associations": "associations (`sacctmgr show associations --json`)",
    "accounts": "accounts (`sacctmgr show accounts --json`)",
    "users": "users (`sacctmgr show users --json`)",
    "qos": "QOS records (`sacctmgr show qos --json`)",
    "tres": "TRES records (`sacctmgr show tres --json`)",
    "pings": "a ping answer",
    "statistics": "scheduler statistics (`sdiag --json`)",
    "sinfo": "`sinfo --json`",
    "shares": "fair-share records (`sshare --json`)",
}
# The text parser names sacct's columns in its messages; the JSON reader names the fields.
JSON_FIELDS: dict[str, str] = {
    "JobID": "job_id",
    "State": "state.current",
    "Start": "time.start",
    "End": "time.end",
    "Submit": "time.submission",
    "Elapsed": "time.elapsed",
    "ElapsedRaw": "time.elapsed",
    "AllocTRES": "tres.allocated",
    "NNodes": "allocation_nodes",
    "Cluster": "cluster",
}
JSON_REASONS: dict[str, str] = {
    "a finished job needs End or Elapsed (or ElapsedRaw)": (
        "a finished job needs time.end or time.elapsed"
    ),
    "no cluster name (add the Cluster column or pass cluster=...)": (
        "no cluster name (cluster is empty: pass cluster=...)"
    ),
}
READ_BYTES = 1 * 2**20
LONGEST_LITERAL = len("-Infinity")
_SPACE = re.compile(r"[ \t\n\r]*")
_BOM = "\ufeff"


def iter_slurm_json_chunks(
    source: SlurmJsonSource, options: SacctOptions | None = None, **keywords: Any
) -> Iterator[pd.DataFrame]:
    """Yield validated usage chunks (see :mod:`accounting.parsing.schema`) from a jobs document.

    ``source``: path, bytes, or binary file object of ``sacct --json`` output or a slurmrestd
    ``/slurmdb/vX/jobs`` response; ``options`` (or the same names as keywords):
    :class:`~accounting.parsing.sacct.SacctOptions` (``columns``, ``delimiter`` and
    ``gpuutil_summed`` do not apply; ``chunk_lines`` counts jobs). Running jobs come last,
    held up to the document's as-of time (its latest time; ``stats.as_of`` says which).

    Raises:
        UsageValidationError: a document of another shape (naming what was expected), one
            whose ``errors`` list is not empty, or bad job records (by line and field, after
            the last chunk): the caller must treat the import as one transaction.
    """
    o = SacctOptions.build(options, keywords)
    stats = o.stats if o.stats is not None else SacctStats()
    yield from hold_running(_json_chunks(source, o, stats), stats.as_of, o.as_of, o.timezone)


def read_slurm_json(source: SlurmJsonSource, **options: Any) -> pd.DataFrame:
    """Whole-document convenience for small inputs and tests: concatenated chunks."""
    chunks = list(iter_slurm_json_chunks(source, **options))
    return pd.concat(chunks, ignore_index=True) if chunks else empty_usage_frame()


def looks_like_json(head: bytes) -> bool:
    """Does the text start (after a byte-order mark and white space) with ``{`` or ``[``?

    sacct's text never does: its first line is a header or a job id.
    """
    return head.removeprefix(codecs.BOM_UTF8).lstrip(b" \t\r\n").startswith((b"{", b"["))


def is_slurm_json(source: SlurmJsonSource) -> bool:
    """Whether ``source`` is JSON (not sacct text), from its first bytes; the position is kept."""
    return looks_like_json(_peek(source, 4096))


def check_slurm_json_head(head: bytes, *, complete: bool) -> None:
    """Refuse, from the first bytes, a JSON upload that is not a Slurm jobs document.

    ``complete``: ``head`` is the whole file (its top-level ``errors`` can then be judged too).
    Raises :class:`UsageValidationError` naming what was expected.
    """
    reader = _JsonReader(io.BytesIO(head), max_value_chars=len(head) + 1, complete=complete)
    document = _Document(reader)
    try:
        for _line, _job in document.jobs():
            # The first job's shape is checked by the walker; errors printed before it count.
            document.refuse_errors()
            return
        document.finish()
    except _HeadEnds:
        return


# -- the document ---------------------------------------------------------------------------


class _HeadEnds(Exception):
    """Internal: a head (not the whole file) ended inside a value; nothing more to judge."""


def _refused(line: int, column: str, reason: str) -> UsageValidationError:
    return UsageValidationError([LineIssue(line, column, reason)])


class _JsonReader:
    """Top-level JSON values read one at a time from a stream, with their line numbers.

    Each value is decoded by the standard library from a buffer that grows until the value is
    whole, so memory follows the largest single value (a job record), which is bounded.
    """

    def __init__(self, stream: Readable, *, max_value_chars: int, complete: bool = True) -> None:
        self._stream = stream
        self._utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._decoder = json.JSONDecoder()
        self._text = ""
        self._pos = 0
        self._line = 1  # the line at self._counted
        self._counted = 0
        self._eof = False
        self._started = False
        self._max_value_chars = max_value_chars
        self._complete = complete
        self.bytes_read = 0

    @property
    def line(self) -> int:
        """1-based line of the reading position."""
        self._line += self._text.count("\n", self._counted, self._pos)
        self._counted = self._pos
        return self._line

    def _line_at(self, position: int) -> int:
        return self.line + self._text.count("\n", self._pos, position)

    def _more(self, at_least: int = 0) -> bool:
        """Append the next piece to the buffer (dropping what was read); False at the end."""
        if self._eof:
            return False
        self._line += self._text.count("\n", self._counted, self._pos)
        self._text, self._pos, self._counted = self._text[self._pos :], 0, 0
        piece = self._stream.read(max(READ_BYTES, at_least))
        if isinstance(piece, str):
            piece = piece.encode("utf-8")
        self.bytes_read += len(piece)
        if not piece:
            self._eof = True
            self._text += self._utf8.decode(b"", final=True)
            return False
        text = self._utf8.decode(piece)
        if not self._started and text:
            self._started = True
            text = text.removeprefix(_BOM)
        self._text += text
        return True

    def peek(self) -> str:
        """The next character that is not white space ("" at the end of the input)."""
        while True:
            space = _SPACE.match(self._text, self._pos)
            self._pos = space.end() if space else self._pos
            if self._pos < len(self._text):
                return self._text[self._pos]
            if not self._more():
                if not self._complete:
                    raise _HeadEnds
                return ""

    def take(self, char: str) -> bool:
        if self.peek() == char:
            self._pos += 1
            return True
        return False

    def expect(self, char: str, after: str) -> None:
        """Consume ``char`` or refuse the document."""
        found = self.peek()
        if found != char:
            shown = f"'{found}'" if found else "the end of the file"
            raise _refused(
                self.line, "*", f"not valid JSON: expected '{char}' {after}, found {shown}"
            )
        self._pos += 1

    def value(self, what: str) -> Any:
        """Decode the next value; ``what`` names it in errors."""
        self.peek()
        while True:
            try:
                found, end = self._decoder.raw_decode(self._text, self._pos)
            except json.JSONDecodeError as exc:
                if _cut_short(exc, len(self._text)) and self._grow(what):
                    continue
                if not self._complete:
                    raise _HeadEnds from None
                line = self._line_at(min(exc.pos, len(self._text)))
                raise _refused(line, "*", f"not valid JSON in {what}: {exc.msg}") from None
            except RecursionError:
                raise _refused(self.line, "*", f"{what} is nested too deeply") from None
            # A number at the buffer's end may go on in the next piece: decode it again then.
            if end == len(self._text) and self._grow(what):
                continue
            if end - self._pos > self._max_value_chars:
                raise self._too_large(what)
            self._pos = end
            return found

    def _grow(self, what: str) -> bool:
        held = len(self._text) - self._pos
        if held > self._max_value_chars:
            raise self._too_large(what)
        return self._more(at_least=held)

    def _too_large(self, what: str) -> UsageValidationError:
        limit = size_text(self._max_value_chars)
        return _refused(self.line, "*", f"{what} is larger than the {limit} limit for one value")


def _cut_short(error: json.JSONDecodeError, buffered: int) -> bool:
    """Did decoding fail where the buffer ends (more input may complete it), not on bad JSON?"""
    # A cut literal ("fals", "-Infinit") fails at its start, a cut string where it opens.
    return error.pos >= buffered - LONGEST_LITERAL or error.msg.startswith("Unterminated string")


class _Document:
    """Walks the top-level object: yields each job record, keeps the other members."""

    def __init__(self, reader: _JsonReader) -> None:
        self.reader = reader
        self.members: dict[str, Any] = {}
        self.jobs_seen = 0
        self.has_jobs = False

    def jobs(self) -> Iterator[tuple[int, Any]]:
        """(line, job record) for each job; the other members are read on the way."""
        reader = self.reader
        if reader.peek() != "{":
            found = "an empty file" if reader.peek() == "" else "JSON that is not an object"
            raise _refused(reader.line, "*", f"expected {EXPECTED_DOCUMENT}; found {found}")
        reader.take("{")
        if reader.take("}"):
            return
        while True:
            key = reader.value("a member name")
            if not isinstance(key, str):
                raise _refused(reader.line, "*", "not valid JSON: a member name is not a string")
            reader.expect(":", f'after "{key}"')
            if key == "jobs":
                yield from self._job_list()
            else:
                self.members[key] = reader.value(f'"{key}"')
            if reader.take(","):
                continue
            reader.expect("}", "after a member of the document")
            break
        if reader.peek() != "":
            raise _refused(reader.line, "*", "text after the end of the JSON document")

    def _job_list(self) -> Iterator[tuple[int, Any]]:
        reader = self.reader
        if reader.peek() != "[":
            not_list = f'"jobs" is not a list; expected {EXPECTED_DOCUMENT}'
            raise _refused(reader.line, "jobs", not_list)
        reader.take("[")
        self.has_jobs = True
        if reader.take("]"):
            return
        while True:
            reader.peek()
            line = reader.line
            job = reader.value("a job record")
            if self.jobs_seen == 0:
                _check_first_job(job, line)
            self.jobs_seen += 1
            yield line, job
            if reader.take(","):
                continue
            reader.expect("]", 'after a job record of "jobs"')
            return

    def finish(self) -> None:
        """After the last job: refuse a document without jobs, or with Slurm errors in it."""
        self.refuse_errors()
        if not self.has_jobs:
            other = [what for key, what in OTHER_DOCUMENTS.items() if key in self.members]
            found = f"this holds {other[0]}" if other else 'it has no "jobs" list'
            raise _refused(1, "jobs", f"expected {EXPECTED_DOCUMENT}; {found}")

    def refuse_errors(self) -> None:
        """Slurm's errors in the document (read so far) refuse it: the list may lack jobs."""
        texts = _error_texts(self.members.get("errors"))
        if texts:
            held = (
                f"{self.jobs_seen} job(s) but reports errors"
                if self.jobs_seen
                else "no jobs: Slurm answered with errors"
            )
            raise _refused(1, "errors", f"the document holds {held}: " + "; ".join(texts))


def _check_first_job(job: Any, line: int) -> None:
    """One look at the first record tells accounting jobs from the controller's live ones."""
    if not isinstance(job, dict):
        not_object = f"a job record is not a JSON object; expected {EXPECTED_DOCUMENT}"
        raise _refused(line, "jobs", not_object)
    if "job_state" in job and "state" not in job:
        raise _refused(line, "jobs", LIVE_JOBS)
    if "job_id" not in job or not isinstance(job.get("time"), dict):
        raise _refused(
            line, "jobs", f'a job record without "job_id" and "time"; expected {EXPECTED_DOCUMENT}'
        )


def _error_texts(errors: Any) -> list[str]:
    """Slurm's error entries (``{"error", "description", "error_number", "source"}``) as text."""
    if not errors:
        return []
    if not isinstance(errors, list):
        return [str(errors)[:200]]
    texts = []
    for entry in errors[:10]:
        if not isinstance(entry, dict):
            texts.append(str(entry)[:200])
            continue
        words = [str(entry.get(key)) for key in ("error", "description") if entry.get(key)]
        where = [f"{key} {entry[key]}" for key in ("source", "error_number") if entry.get(key)]
        text = " - ".join(dict.fromkeys(words)) or "an error"
        texts.append(f"{text} ({', '.join(where)})" if where else text)
    return texts


# -- chunks ---------------------------------------------------------------------------------


def _json_chunks(
    source: SlurmJsonSource, o: SacctOptions, stats: SacctStats
) -> Iterator[pd.DataFrame]:
    issues = IssueCollector(max_errors=o.max_errors)
    # The sacct reader's rules, fed the rows sacct's text would hold: one behaviour for both.
    context = ChunkContext(
        cluster=o.cluster,
        aliases=o.aliases,
        partition_models=dict(o.partition_models or {}),
        default_model=o.default_model,
        unknown_model=o.unknown_model,
        timezone=o.timezone,
        gpuutil_summed=o.gpuutil_summed,
        issues=issues,
        stats=stats,
    )
    emitted = 0
    try:
        with _open_json(source) as (stream, total_bytes, max_value_bytes):
            reader = _JsonReader(stream, max_value_chars=max_value_bytes)
            document = _Document(reader)
            rows: list[list[Any]] = []

            def chunk() -> pd.DataFrame:
                nonlocal emitted
                records = _records(rows, context, o.timezone)
                rows.clear()
                emitted += len(records) if not issues else 0
                if o.progress is not None:
                    progress = ParseProgress(reader.bytes_read, reader.line, emitted, total_bytes)
                    o.progress(progress)
                return records

            for line, record in document.jobs():
                row = job_row(record, line, issues, stats)
                if row is not None:
                    rows.append(row)
                if len(rows) >= o.chunk_lines:
                    records = chunk()
                    if not issues and len(records):
                        yield records
            records = chunk()
            if not issues and len(records):
                yield records
            document.finish()
    except TooManyIssues:
        raise _json_error(issues, truncated=True) from None
    if issues:
        raise _json_error(issues)


def _records(rows: list[list[Any]], context: ChunkContext, timezone: str) -> pd.DataFrame:
    if not rows:
        return conform_usage_frame(pd.DataFrame())
    jobs = rows_frame(rows, timezone)
    context.stats.allocation_lines += len(jobs)
    no_utilization = np.full(len(jobs), np.nan)  # steps are not read
    return context.jobs_to_records(jobs, job_durations(jobs), no_utilization)


def _json_error(issues: IssueCollector, *, truncated: bool = False) -> UsageValidationError:
    """The collected issues, named by JSON field instead of sacct column."""
    named = [
        LineIssue(
            issue.line,
            JSON_FIELDS.get(issue.column, issue.column),
            JSON_REASONS.get(issue.reason, issue.reason),
        )
        for issue in issues.issues
    ]
    return UsageValidationError(named, truncated=truncated)


@contextlib.contextmanager
def _open_json(source: SlurmJsonSource) -> Iterator[tuple[BoundedStream, int | None, int]]:
    """The source as a bounded stream, its size, and the most bytes one value may take.

    slurmrestd may send the whole document as one line, so the per-line limit of the text
    readers does not apply: one value (a job record) is held to the block limit instead.
    """
    if isinstance(source, bytes | bytearray | memoryview):
        source = io.BytesIO(bytes(source))
    with open_source(source) as (stream, total):
        limits = stream.limits
        one_line = dataclasses.replace(limits, max_line_bytes=2**62)
        yield BoundedStream(stream.raw, one_line), total, limits.max_block_bytes


def _peek(source: SlurmJsonSource, size: int) -> bytes:
    """The first ``size`` bytes of ``source`` without moving it (b"" when it cannot seek)."""
    if isinstance(source, bytes | bytearray | memoryview):
        return bytes(source[:size])
    if isinstance(source, str | os.PathLike):
        with open(os.fspath(source), "rb") as handle:
            return handle.read(size)
    stream: IO[Any] = source
    try:
        position = stream.tell()
        head = stream.read(size)
        stream.seek(position)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return b""
    return head.encode("utf-8") if isinstance(head, str) else bytes(head)

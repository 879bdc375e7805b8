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
import math
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
from accounting.parsing.fields import LATEST_TIME, SLURM_TIME_FORMAT, job_durations
from accounting.parsing.sacct import ChunkContext, SacctOptions, SacctStats
from accounting.parsing.schema import SCHEDULER_STATES, conform_usage_frame, empty_usage_frame

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
# Slurm's job_state_string(): these flags are printed instead of the base state, in this order
# (only the ones with a usage state; CONFIGURING and the like fall back to the base state).
STATE_FLAG_ORDER: tuple[str, ...] = tuple(
    word
    for word in (
        "COMPLETING",
        "STAGE_OUT",
        "RESIZING",
        "REQUEUED",
        "REQUEUE_FED",
        "REQUEUE_HOLD",
        "SPECIAL_EXIT",
        "STOPPED",
        "REVOKED",
        "SIGNALING",
    )
    if word in SCHEDULER_STATES
)
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
LATEST_EPOCH_S = int((LATEST_TIME - pd.Timestamp("1970-01-01")).total_seconds())
FRAME_COLUMNS: tuple[str, ...] = (
    "jobid",
    "jobidraw",
    "cluster",
    "partition",
    "account",
    "user",
    "submit",
    "start",
    "end",
    "elapsedraw",
    "state",
    "nnodes",
    "alloctres",
    "nodelist",
    "source_line",
)
_TIME_FIELDS = ("submission", "start", "end")
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


# -- one job record -> one row of sacct's columns ------------------------------------------------


class _Bad:
    """A value that is not of the field's type (the reason is said by the caller)."""


BAD = _Bad()


def _whole(value: Any) -> int | None | _Bad:
    """A whole number, plain or ``{"set", "infinite", "number"}`` (unset or infinite: None)."""
    if isinstance(value, dict) and "number" in value:
        if value.get("set") is False or value.get("infinite") is True:
            return None
        value = value["number"]
    if value is None:
        return None
    if isinstance(value, bool):
        return BAD
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return BAD


def _text(value: Any) -> str | _Bad:
    if value is None:
        return ""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")  # no database text holds NUL
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return BAD


def _state_word(value: Any) -> str | _Bad:
    """``"COMPLETED"`` (dbv0.0.38) or ``["PENDING", "REQUEUED"]`` (v0.0.40+) -> the word
    sacct's text prints: a flag Slurm prints before the base state, else the base state."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(word, str) for word in value):
        words = [word.upper() for word in value]
        return next((flag for flag in STATE_FLAG_ORDER if flag in words), words[0])
    return BAD


def _gpu_tres(value: Any) -> str | _Bad:
    """``tres.allocated`` -> its GPU entries as AllocTRES text (``gres/gpu:h100=2,...``)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return BAD
    entries = []
    for entry in value:
        if not isinstance(entry, dict):
            return BAD
        name = entry.get("name")
        if entry.get("type") != "gres" or not isinstance(name, str):
            continue
        if name != "gpu" and not name.startswith("gpu:"):
            continue
        count = _whole(entry.get("count"))
        shown = str(count) if isinstance(count, int) else _shown(entry.get("count"))
        # Slurm's gres names hold neither; kept out so the AllocTRES reader sees one entry.
        entries.append(f"gres/{name.replace(',', ';').replace('=', ':')}={shown}")
    return ",".join(entries)


@dataclasses.dataclass
class _Job:
    """Reads the fields of one record; a field of the wrong type is an issue at its line."""

    record: dict[str, Any]
    line: int
    issues: IssueCollector
    ok: bool = True

    def node(self, path: str) -> Any:
        value: Any = self.record
        for key in path.split("."):
            value = value.get(key) if isinstance(value, dict) else None
        return value

    def whole(self, path: str, *, minimum: int = 0) -> int | None:
        value = _whole(self.node(path))
        if isinstance(value, _Bad) or (value is not None and value < minimum):
            self.problem(path, f"{_shown(self.node(path))} is not a whole number (>= {minimum})")
            return None
        return value

    def text(self, *paths: str) -> str:
        """The first of ``paths`` that holds text ("" when none does)."""
        for path in paths:
            value = _text(self.node(path))
            if isinstance(value, _Bad):
                self.problem(path, f"{_shown(self.node(path))} is not text")
                return ""
            if value:
                return value
        return ""

    def epoch(self, key: str) -> int | None:
        """``time.<key>`` in Unix seconds; 0 and unset mean no time (Slurm's Unknown)."""
        seconds = self.whole(f"time.{key}")
        if seconds is not None and seconds > LATEST_EPOCH_S:
            self.problem(f"time.{key}", f"{seconds} is not a time (Unix seconds before 2200)")
            return None
        return seconds or None

    def problem(self, path: str, reason: str) -> None:
        self.ok = False
        self.issues.add(self.line, path, reason)


def _shown(value: Any) -> str:
    return repr(value)[:80]


def _job_row(record: Any, line: int, issues: IssueCollector, stats: SacctStats) -> list[Any] | None:
    """The record as the allocation line sacct would print (None when it is malformed)."""
    if not isinstance(record, dict):
        issues.add(line, "jobs", f"a job record is not a JSON object ({_shown(record)})")
        return None
    job = _Job(record, line, issues)
    job_id = job.whole("job_id")
    if job_id is None and job.ok:
        job.problem("job_id", "missing: every job record has one")
    label = str(job_id)
    array_job, het_job = job.whole("array.job_id"), job.whole("het.job_id")
    if array_job:
        task = job.whole("array.task_id")
        # A pending array's own record (no task id) reads "123_[0-9]", as sacct prints it.
        tasks = str(task) if task is not None else f"[{job.text('array.task')}]"
        label = f"{array_job}_{tasks}"
    elif het_job:
        offset = job.whole("het.job_offset")
        label = f"{het_job}+{offset}" if offset is not None else label
    state = _state_word(job.node("state.current"))
    if isinstance(state, _Bad):
        job.problem("state.current", f"{_shown(job.node('state.current'))} is not a job state")
    tres = _gpu_tres(job.node("tres.allocated"))
    if isinstance(tres, _Bad):
        job.problem("tres.allocated", "not a list of TRES entries (type, name, count)")
    submit, start, end = (job.epoch(key) for key in _TIME_FIELDS)
    elapsed = job.whole("time.elapsed")
    nodes = job.whole("allocation_nodes")
    row = [
        label,
        str(job_id),
        job.text("cluster", "association.cluster"),
        job.text("partition"),
        job.text("account", "association.account"),
        job.text("user", "association.user"),
        submit,
        start,
        end,
        "" if elapsed is None else str(elapsed),
        state,
        "" if nodes is None else str(nodes),
        tres,
        job.text("nodes"),
        line,
    ]
    steps = record.get("steps")
    stats.step_lines += len(steps) if isinstance(steps, list) else 0
    return row if job.ok else None


def _local_text(seconds: pd.Series, timezone: str) -> pd.Series:
    """Unix seconds -> wall-clock text in ``timezone`` as sacct prints it; None -> Unknown."""
    present = seconds.notna().to_numpy()
    text = pd.Series("Unknown", index=seconds.index, dtype="str")
    if present.any():
        stamps = pd.to_datetime(seconds[present].astype("int64"), unit="s", utc=True)
        if timezone.upper() != "UTC":
            stamps = stamps.dt.tz_convert(timezone)
        text[present] = stamps.dt.strftime(SLURM_TIME_FORMAT)
    return text


def _rows_frame(rows: list[list[Any]], timezone: str) -> pd.DataFrame:
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(FRAME_COLUMNS)
    frame = pd.DataFrame(
        {
            name: pd.Series(values, dtype="object")
            for name, values in zip(FRAME_COLUMNS, columns, strict=True)
        }
    )
    for name in ("submit", "start", "end"):
        frame[name] = _local_text(frame[name], timezone)
    for name in FRAME_COLUMNS:
        if name not in ("submit", "start", "end", "source_line"):
            frame[name] = frame[name].astype("str")
    frame["source_line"] = frame["source_line"].astype("int64")
    frame["_group"] = np.arange(len(frame), dtype="int64")
    return frame


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
                row = _job_row(record, line, issues, stats)
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
    jobs = _rows_frame(rows, timezone)
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

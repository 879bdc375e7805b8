"""DCGM samples of uploaded Prometheus HTTP API answers (``/api/v1/query_range`` JSON).

One query_range answers one query, and often one metric, so a file may hold several answers:
concatenated (what ``curl ... >> file`` appends, with or without newlines between) or as one
JSON array of answers. The file is read in blocks; each series' ``values`` array is cut out as
it passes and parsed alone, and what remains (the answers' structure and labels, small) is
parsed as JSON at the end: memory follows one block, the samples kept and the labels, not the
file. The samples are those a text export of the same period gives (telemetry.export_text):
the same fields, labels, value rules and limits, all or nothing.

The same reading without the values checks an upload before it is queued
(:func:`answers_problem`, a 400): an error answer, an instant query's ``vector``, a ``scalar``
or ``string``, or JSON that is not a Prometheus answer is refused naming the export to make.
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from itertools import chain
from typing import IO, Any

import numpy as np
import pandas as pd

from core.uploads.sniff import SNIFF_BYTES, text_problem
from telemetry import export_text, promql
from telemetry.export_text import ExportError, Samples
from telemetry.prometheus import ERROR_TYPES

# Everything of the file but its values arrays (labels, structure): parsed as JSON at once.
MAX_STRUCTURE_BYTES = 16 * 1024 * 1024
# One series' values (Prometheus answers at most 11,000 points a series: ~0.3 MiB compact).
MAX_VALUES_BYTES = 16 * 1024 * 1024
QUERY_RANGE = (
    "curl -sG '<prometheus>/api/v1/query_range' --data-urlencode "
    "'query={__name__=~\"DCGM_FI_.*\"}' --data-urlencode 'start=<first day>T00:00:00Z' "
    "--data-urlencode 'end=<day after the last>T00:00:00Z' --data-urlencode "
    "'step=<scrape interval s>'"
)
SLURM_JSON = "This is Slurm job accounting, not GPU telemetry: import it on the usage import page."

_BOM = b"\xef\xbb\xbf"
# A key is preceded by "{", "," or whitespace; inside a JSON string a quote is escaped, so
# this matches the "values" key only, never text within a label value.
_VALUES = re.compile(rb'(?<=[{,\s])"values"\s*:\s*\[')
_EMPTY = re.compile(rb"\s*\]")
_END = re.compile(rb"\]\s*\]")  # the pairs hold no brackets: the first "]]" ends the array
_SPACE = re.compile(r"[ \t\n\r]*")
_JSON_START = re.compile(rb'(?:\xef\xbb\xbf)?\s*(?:\{\s*["}]|\[)')
_NONE = (np.empty(0), np.empty(0))


def is_json(head: bytes) -> bool:
    """Whether a file starts like JSON: a text export starts with "#" or a metric name, and
    ``promtool tsdb dump`` with ``{__name__=...``, never ``{"`` or ``[``."""
    return _JSON_START.match(head) is not None


def answer_problem(status: object, result_type: object, error_type: object = None) -> str | None:
    """Why an answer with this status and resultType holds no DCGM series over a period."""
    if status == "error":
        kind = f", errorType {error_type}" if error_type in ERROR_TYPES else ""
        return (
            f'This is a Prometheus error answer (status "error"{kind}): the query failed and '
            f'holds no samples; run it again and upload the answer with status "success": '
            f"{QUERY_RANGE}."
        )
    if status != "success":
        return (
            'This JSON is not a Prometheus HTTP API answer (no "status": "success"); upload '
            f"what this prints: {QUERY_RANGE}."
        )
    if result_type == "vector":
        return (
            'This is an instant query\'s answer (/api/v1/query, resultType "vector"): one value '
            "per series at one instant, which cannot give a period's energy or activity; export "
            f"the period with /api/v1/query_range instead: {QUERY_RANGE}."
        )
    if result_type in ("scalar", "string"):
        return (
            f'This is a Prometheus answer of resultType "{result_type}": one value without '
            "series or labels, not DCGM samples; query the DCGM fields themselves over the "
            f"period: {QUERY_RANGE}."
        )
    if result_type is None:
        return f'This answer has no "resultType"; upload what this prints: {QUERY_RANGE}.'
    if result_type != "matrix":
        return (
            f"This answer's resultType is {str(result_type)[:40]!r}, not a query_range "
            f'"matrix"; upload what this prints: {QUERY_RANGE}.'
        )
    return None


@dataclass
class _Structure:
    """The file with each values array replaced by ``[n]`` (n: the array's number)."""

    text: bytearray = field(default_factory=bytearray)
    cuts: list[int] = field(default_factory=lambda: [0])  # offset in text of each piece
    origins: list[int] = field(default_factory=lambda: [0])  # its offset in the file
    arrays: int = 0

    def add(self, piece: bytes, origin: int) -> None:
        if piece:
            self.cuts.append(len(self.text))
            self.origins.append(origin)
            self.text += piece
        if len(self.text) > MAX_STRUCTURE_BYTES:
            raise ExportError(
                f"The answers' labels and structure (all but the values) take more than "
                f"{MAX_STRUCTURE_BYTES // 2**20} MiB: upload fewer series per file."
            )

    def placeholder(self) -> None:
        self.text += b'"values":[%d]' % self.arrays
        self.arrays += 1
        if self.arrays > export_text.MAX_UPLOAD_SERIES:
            raise ExportError(f"More than {export_text.MAX_UPLOAD_SERIES} series in the answers.")

    def file_offset(self, at: int) -> int:
        """The file's byte offset of the structure's byte ``at`` (about, inside a placeholder)."""
        piece = bisect.bisect_right(self.cuts, at) - 1
        return self.origins[piece] + at - self.cuts[piece]


def _blocks(stream: IO[bytes]) -> Iterator[bytes]:
    """The file in blocks, refused if it is not text or larger than the upload limit."""
    head = stream.read(SNIFF_BYTES)
    problem = text_problem(head)
    if problem is not None:
        raise ExportError(f"The export is {problem}.")
    read, chunk = len(head), head
    while chunk:
        if read > export_text.MAX_UPLOAD_BYTES:
            limit = export_text.MAX_UPLOAD_BYTES // 2**20
            raise ExportError(f"The export is larger than {limit} MiB.")
        yield chunk
        chunk = stream.read(export_text.BLOCK_BYTES)
        read += len(chunk)


def _array_end(buffer: bytes, start: int) -> int | None:
    """Where the values array opening at ``start`` ends; None if not in ``buffer`` yet."""
    match = _EMPTY.match(buffer, start + 1) or _END.search(buffer, start + 1)
    return None if match is None else match.end()


def _structure(stream: IO[bytes], on_array: Callable[[bytes, int], None]) -> _Structure:
    """The file's structure, each values array given to ``on_array`` (with its file offset)."""
    out = _Structure()
    carry, carry_at = b"", 0  # bytes kept for the next block, and their file offset
    for block in chain(_blocks(stream), [None]):
        buffer, pos, pending = carry + (block or b""), 0, None
        while (match := _VALUES.search(buffer, pos)) is not None:
            end = _array_end(buffer, match.end() - 1)
            if end is None:
                pending = match  # the array goes on in the next block
                break
            out.add(buffer[pos : match.start()], carry_at + pos)
            out.placeholder()
            on_array(buffer[match.end() - 1 : end], carry_at + match.end() - 1)
            pos = end
        if block is None:
            if pending is not None:
                at = carry_at + pending.start()
                raise ExportError(f"The file ends inside a series' values (from byte {at}).")
            out.add(buffer[pos:], carry_at + pos)
            return out
        # Keep what a "values" key cut by the block's edge may start with, and the byte
        # before it: a key comes after the last "," or "{", and holds neither.
        if pending is not None:
            cut = max(pos, pending.start() - 1)
        else:
            cut = max(pos, buffer.rfind(b",", pos), buffer.rfind(b"{", pos))
        out.add(buffer[pos:cut], carry_at + pos)
        carry, carry_at = buffer[cut:], carry_at + cut
        if len(carry) > MAX_VALUES_BYTES:
            raise ExportError(
                f"From byte {carry_at}, more than {MAX_VALUES_BYTES // 2**20} MiB without the "
                "end of a series' values: split the period into shorter query_range calls."
            )
    return out


def _pairs(array: bytes, at: int) -> tuple[np.ndarray, np.ndarray]:
    """A values array's times (epoch s) and values, by the text export's value rules."""
    try:
        pairs = json.loads(array)
    except (ValueError, RecursionError) as exc:
        raise ExportError(f"The series' values at byte {at} are not JSON.") from exc
    if not all(
        type(pair) is list and len(pair) == 2 and type(pair[0]) in (int, float)
        and type(pair[1]) is str
        for pair in pairs
    ):  # fmt: skip
        raise ExportError(f'The series\' values at byte {at} are not [time, "value"] pairs.')
    stamps = np.fromiter((pair[0] for pair in pairs), dtype=np.float64, count=len(pairs))
    texts = pd.Series([pair[1] for pair in pairs], dtype=object)
    values, not_numbers = export_text.sample_values(texts)
    if not_numbers.any():
        bad = texts.iloc[int(np.flatnonzero(not_numbers)[0])]
        raise ExportError(f"The series' values at byte {at}: {bad[:40]!r} is not a number.")
    return stamps, values


def _documents(structure: _Structure) -> Iterator[Any]:
    """The JSON documents of the file, one after another."""
    raw = bytes(structure.text)
    bom = len(_BOM) if raw.startswith(_BOM) else 0
    try:
        text = raw[bom:].decode("utf-8")
    except UnicodeDecodeError as exc:
        at = structure.file_offset(bom + exc.start)
        raise ExportError(f"The export is not UTF-8 text (byte {at}).") from exc
    decoder, pos = json.JSONDecoder(), 0

    def near(char: int) -> int:  # only for a message: encodes the text up to there
        return structure.file_offset(bom + len(text[:char].encode()))

    while True:
        space = _SPACE.match(text, pos)
        pos = space.end() if space else pos
        if pos >= len(text):
            return
        try:
            document, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            raise ExportError(f"Not JSON near byte {near(exc.pos)}: {exc.msg}.") from exc
        except RecursionError as exc:
            raise ExportError(f"JSON nested too deeply near byte {near(pos)}.") from exc
        yield document


def _series(answer: Any, number: int) -> list[Any]:
    """The result items of one answer, refused unless it is a successful query_range."""
    if not isinstance(answer, dict):
        raise ExportError(f"Answer {number} of the file is not a Prometheus answer: {QUERY_RANGE}.")
    if "jobs" in answer:
        raise ExportError(SLURM_JSON)
    data = answer.get("data")
    data = data if isinstance(data, dict) else {}
    problem = answer_problem(answer.get("status"), data.get("resultType"), answer.get("errorType"))
    if problem is not None:
        raise ExportError(f"Answer {number} of the file: {problem}" if number > 1 else problem)
    result = data.get("result")
    if not isinstance(result, list):
        raise ExportError(f'Answer {number} of the file has no "result" list.')
    return result


@dataclass
class _Series:
    """One result item that is a DCGM field: its values array's number, series key and row."""

    array: int
    key: str
    row: tuple[str, ...]


def _dcgm_series(item: Any, where: str, used: np.ndarray) -> _Series | None:
    """The item's DCGM series (None for another metric, ignored as the text export does)."""
    values = item.get("values") if isinstance(item, dict) else None
    metric = item.get("metric") if isinstance(item, dict) else None
    array = values[0] if isinstance(values, list) and len(values) == 1 else None
    if not isinstance(metric, dict) or type(array) is not int or not 0 <= array < len(used):
        raise ExportError(f'{where} has no "metric" labels and "values".')
    if used[array]:
        raise ExportError(f"{where}: its values are given twice.")
    used[array] = True
    name = metric.get("__name__")
    if not isinstance(name, str) or not name:
        raise ExportError(
            f"{where} has no metric name (__name__): its query computed over the fields "
            f"(avg_over_time, sum by, ...); export the DCGM fields themselves: {QUERY_RANGE}."
        )
    name = name.removesuffix("_total")  # as the text export reads OpenMetrics counters
    if name not in promql.FIELDS:
        return None
    labels = [metric.get(label, "") for label in export_text.LABELS]
    if not all(isinstance(label, str) for label in labels) or not labels[0] or not labels[1]:
        raise ExportError(
            f"{where} ({name}) lacks a label dcgm-exporter writes: a DCGM sample needs the "
            "Hostname and gpu labels."
        )
    return _Series(array, json.dumps(metric, sort_keys=True), (name, *labels))


def _read(stream: IO[bytes], on_array: Callable[[bytes, int], None]) -> list[_Series]:
    """The DCGM series of every answer in the file, all checked; values to ``on_array``."""
    structure = _structure(stream, on_array)
    used = np.zeros(structure.arrays, dtype=bool)
    found: list[_Series] = []
    number = 0
    for document in _documents(structure):
        for answer in document if isinstance(document, list) else [document]:
            number += 1
            for index, item in enumerate(_series(answer, number)):
                series = _dcgm_series(item, f"Series {index + 1} of answer {number}", used)
                if series is not None:
                    found.append(series)
    if number == 0:
        raise ExportError("The file holds no JSON.")
    if not used.all():
        raise ExportError('Not a query_range answer: a "values" array outside a series.')
    return found


def _too_many() -> ExportError:
    return ExportError(
        f"More than {export_text.MAX_UPLOAD_SAMPLES} samples in the answers: query only the "
        "DCGM fields Fleetwise reads, or upload a shorter period per file."
    )


def read_json_export(stream: IO[bytes]) -> pd.DataFrame:
    """DCGM samples of query_range answers, all or nothing: the long frame
    :func:`telemetry.export_text.read_export` gives (metric, Hostname, gpu, UUID, modelName,
    t, value). A point given twice (answers of adjacent periods share their edge) counts once."""
    arrays: list[tuple[np.ndarray, np.ndarray]] = []
    counted = 0

    def keep(array: bytes, at: int) -> None:
        nonlocal counted
        arrays.append(_pairs(array, at))
        counted += len(arrays[-1][0])
        if counted > export_text.MAX_UPLOAD_SAMPLES:
            raise _too_many()

    found = _read(stream, keep)
    kept = Samples()
    numbers_of: dict[int, list[int]] = {}  # series code -> its values arrays (one per answer)
    for series in found:
        numbers_of.setdefault(kept.series_code(series.key, series.row), []).append(series.array)
    for code, numbers in numbers_of.items():
        stamps = np.concatenate([arrays[number][0] for number in numbers])
        values = np.concatenate([arrays[number][1] for number in numbers])
        if len(numbers) > 1:  # a series in several answers: a point given twice counts once
            stamps, first = np.unique(stamps, return_index=True)
            values = values[first]
        for number in numbers:
            arrays[number] = _NONE  # memory: each series' arrays are copied once, not twice
        if len(stamps):
            kept.add(np.full(len(stamps), code, dtype=np.int32), stamps, values)
    if kept.count == 0:
        raise ExportError("The export holds no DCGM_FI_* samples.")
    return export_text.samples_frame(kept, openmetrics=True)  # times are in seconds


def answers_problem(upload: Any) -> str | None:
    """Why an uploaded JSON file is not query_range answers of DCGM series, or None; read
    whole without its values (those the worker reads), the position kept."""
    counted = 0

    def count(array: bytes, at: int) -> None:  # the pairs' brackets, not parsed
        nonlocal counted
        counted += max(0, array.count(b"[") - 1)
        if counted > export_text.MAX_UPLOAD_SAMPLES:
            raise _too_many()

    position = upload.tell()
    try:
        found = _read(upload, count)
    except ExportError as exc:
        return str(exc)
    finally:
        upload.seek(position)
    return None if found else "The answers hold no DCGM_FI_* series: " + QUERY_RANGE + "."

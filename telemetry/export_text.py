"""DCGM samples of an uploaded OpenMetrics / Prometheus text export, read in bounded memory.

``promtool tsdb dump`` is read too: its lines are ``{__name__="…", labels…} value ms``.

The file is read in blocks of lines (``BLOCK_BYTES``), each block parsed vectorised, and only
the DCGM samples kept, as three flat arrays (series code, time, value) beside one table of
the distinct series: memory follows the samples kept and one block, not the file (a 240 MiB
export read whole, then split into Python strings, took a worker child to 3.5 GB). Each
distinct ``name{labels}`` is parsed once; prometheus_client's parser takes ~0.5 ms a sample.
All or nothing: the first bad lines (by number) fail the whole file.
"""

from __future__ import annotations

import codecs
import io
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO

import numpy as np
import pandas as pd

from core.uploads.sniff import SNIFF_BYTES, text_problem
from telemetry import promql

# Bounds of one uploaded export: bytes, one line, DCGM samples, distinct DCGM series.
MAX_UPLOAD_BYTES = 256 * 1024 * 1024
MAX_LINE_BYTES = 1024 * 1024
MAX_UPLOAD_SAMPLES = 5_000_000
MAX_UPLOAD_SERIES = 400_000  # 50,000 GPUs × the eight DCGM fields
BLOCK_BYTES = 8 * 1024 * 1024
LABELS = (promql.HOST_LABEL, promql.GPU_LABEL, promql.UUID_LABEL, promql.MODEL_LABEL)
COLUMNS = ("metric", *LABELS)

# ``name{labels}``, or ``{labels}`` with the name as ``__name__`` (``promtool tsdb dump``).
_HEAD = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)?(?:\{(?P<labels>.*)\})?$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class ExportError(ValueError):
    """An uploaded export that cannot be used (the message names the line or the limit)."""


def _bad_lines(mask, line_numbers: np.ndarray, reason: str) -> None:
    mask = np.asarray(mask, dtype=bool)
    if mask.any():
        first = ", ".join(str(n) for n in line_numbers[mask][:5])
        raise ExportError(f"Not an OpenMetrics / Prometheus text export: line {first}: {reason}")


def _series_row(head: str) -> tuple[str | None, ...]:
    """A ``name{labels}``'s metric name (``_total`` dropped) and the four GPU labels."""
    match = _HEAD.match(head)
    if match is None:
        return (None, *[""] * len(LABELS))
    labels = dict(_LABEL.findall(match.group("labels") or ""))
    name = match.group("name") or labels.get("__name__")
    if not name:
        return (None, *[""] * len(LABELS))
    # OpenMetrics names counters ..._total; dcgm-exporter's text format does not.
    name = name.removesuffix("_total")
    return (name, *(labels.get(label, "") for label in LABELS))


@dataclass
class Samples:
    """What the blocks kept: the DCGM series seen, and per sample its series, time and value.
    (The query_range JSON reader, telemetry.export_json, keeps its samples here too.)"""

    codes: dict[str, int] = field(default_factory=dict)
    rows: list[tuple[str | None, ...]] = field(default_factory=list)
    unlabelled: list[bool] = field(default_factory=list)  # no Hostname or gpu label
    parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=list)
    count: int = 0

    def series_code(self, key: str, row: tuple[str | None, ...]) -> int:
        """The code of the DCGM series ``key`` (its whole name and labels), new if unseen."""
        code = self.codes.get(key)
        if code is None:
            code = self.codes[key] = len(self.rows)
            self.rows.append(row)
            self.unlabelled.append(not row[1] or not row[2])
            if len(self.rows) > MAX_UPLOAD_SERIES:
                raise ExportError(f"More than {MAX_UPLOAD_SERIES} distinct DCGM series.")
        return code

    def code_of(self, heads: pd.Index, numbers: np.ndarray, first: np.ndarray) -> np.ndarray:
        """Each head's series code, -1 for a sample that is not DCGM; bad heads refused."""
        out = np.full(len(heads), -1, dtype=np.int64)
        bad = np.zeros(len(heads), dtype=bool)
        for index, head in enumerate(heads):
            code = self.codes.get(head)
            if code is not None:
                out[index] = code
                continue
            row = _series_row(head)
            if row[0] is None:
                bad[index] = True
            elif row[0] in promql.FIELDS:
                out[index] = self.series_code(head, row)
        _bad_lines(bad, numbers[first], "not a sample with a timestamp")
        return out

    def add(self, codes: np.ndarray, stamps: np.ndarray, values: np.ndarray) -> None:
        self.count += len(codes)
        if self.count > MAX_UPLOAD_SAMPLES:
            raise ExportError(f"More than {MAX_UPLOAD_SAMPLES} DCGM samples.")
        self.parts.append((codes.astype(np.int32), stamps, values))


def sample_values(texts: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """Sample values as numbers ("NaN", "+Inf" and "-Inf" included) and which are not numbers."""
    values = pd.to_numeric(texts, errors="coerce").to_numpy(dtype=np.float64)
    return values, np.isnan(values) & (texts.str.lower() != "nan").to_numpy(dtype=bool)


def _parse_block(lines: list[str], first_line: int, kept: Samples) -> None:
    """One block of lines: its DCGM samples checked and added to ``kept``."""
    text = pd.Series(lines, dtype=object)
    keep = ~(text.str.startswith("#") | (text.str.strip() == "")).to_numpy(dtype=bool)
    if not keep.any():
        return
    numbers = np.flatnonzero(keep) + first_line
    # name{labels} value timestamp: the last two fields split off (labels may hold spaces).
    parts = text[keep].str.rsplit(" ", n=2, expand=True).reindex(columns=[0, 1, 2])
    local, heads = pd.factorize(parts[0].fillna(""))
    _, first = np.unique(local, return_index=True)
    codes = kept.code_of(pd.Index(heads), numbers, first)[local]
    wanted = codes >= 0
    parts, codes, numbers = parts[wanted], codes[wanted], numbers[wanted]
    values, not_numbers = sample_values(parts[1])
    _bad_lines(not_numbers, numbers, "not a number")
    stamps = pd.to_numeric(parts[2], errors="coerce").to_numpy(dtype=np.float64)
    _bad_lines(np.isnan(stamps), numbers, "a sample without a timestamp")
    unlabelled = np.array(kept.unlabelled, dtype=bool)[codes]
    _bad_lines(unlabelled, numbers, "a DCGM sample needs the Hostname and gpu labels")
    kept.add(codes, stamps, values)


def _blocks(stream: IO[bytes]) -> Iterator[tuple[list[str], int]]:
    """Blocks of whole lines (decoded as UTF-8) and the number of each block's first line;
    the byte and line limits counted while reading."""
    head = stream.read(SNIFF_BYTES)
    problem = text_problem(head)
    if problem is not None:
        raise ExportError(f"The export is {problem}.")
    decoder = codecs.getincrementaldecoder("utf-8-sig")()
    read, rest, line = len(head), "", 1
    chunk = head
    while chunk:
        if read > MAX_UPLOAD_BYTES:
            raise ExportError(f"The export is larger than {MAX_UPLOAD_BYTES // 2**20} MiB.")
        try:
            text = rest + decoder.decode(chunk)
        except UnicodeDecodeError as exc:
            raise ExportError(f"The export is not UTF-8 text (after line {line}).") from exc
        lines = text.split("\n")
        rest = lines.pop()
        if len(rest) > MAX_LINE_BYTES:
            raise ExportError(f"Line {line + len(lines)} is longer than {MAX_LINE_BYTES} bytes.")
        if lines:
            yield [item.removesuffix("\r") for item in lines], line
            line += len(lines)
        chunk = stream.read(BLOCK_BYTES)
        read += len(chunk)
    try:
        rest += decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise ExportError(f"The export is not UTF-8 text (line {line}).") from exc
    if rest:
        yield [rest.removesuffix("\r")], line


def samples_frame(kept: Samples, openmetrics: bool) -> pd.DataFrame:
    """The long frame: metric and labels (categorical: one copy of each text) per sample."""
    table = pd.DataFrame(kept.rows, columns=list(COLUMNS)).astype("category")
    empty = (np.empty(0, np.int32), np.empty(0), np.empty(0))
    codes, stamps, values = (np.concatenate(a) for a in zip(*(kept.parts or [empty]), strict=True))
    frame = table.iloc[codes].reset_index(drop=True)
    frame["t"] = stamps if openmetrics else stamps / 1000.0
    frame["value"] = values
    return frame


def read_export(stream: IO[bytes]) -> pd.DataFrame:
    """DCGM samples of an OpenMetrics / Prometheus text export, all or nothing: a long frame
    (metric, Hostname, gpu, UUID, modelName, t, value). Samples need timestamps (seconds in
    OpenMetrics, milliseconds in the Prometheus text format; ``# EOF`` at the end says which)."""
    kept, last = Samples(), ""
    for lines, first_line in _blocks(stream):
        _parse_block(lines, first_line, kept)
        last = next((item for item in reversed(lines) if item.strip()), last)
    if kept.count == 0:
        raise ExportError("The export holds no DCGM_FI_* samples.")
    return samples_frame(kept, openmetrics=last.strip() == "# EOF")


def parse_export(text: str) -> pd.DataFrame:
    """:func:`read_export` of text already in memory."""
    return read_export(io.BytesIO(text.encode()))

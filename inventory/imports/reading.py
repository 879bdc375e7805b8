"""Reading an upload or pasted text into a ParsedTable (cells as text), within the limits."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import pandas as pd

from core.uploads.archive import UnsafeArchive, check_xlsx_archive
from inventory.import_readers import (
    XLSX_READ_ERRORS,
    check_text,
    check_text_shape,
    read_first_sheet,
)
from inventory.imports.kinds import (
    FIRST_DATA_ROW,
    MAX_ROWS,
    MAX_UPLOAD_BYTES,
    MAX_XLSX_INFLATED_BYTES,
    ImportFileError,
)


@dataclass(frozen=True)
class ParsedTable:
    """The cells of an uploaded table as stripped text, indexed by spreadsheet row number."""

    frame: pd.DataFrame

    def to_payload(self) -> dict[str, list]:
        """A JSON-serialisable form (for the session between preview and commit)."""
        return {
            "columns": list(self.frame.columns),
            "rows": [int(i) for i in self.frame.index],
            "cells": self.frame.to_numpy().tolist(),
        }

    @classmethod
    def from_payload(cls, payload: dict[str, list]) -> ParsedTable:
        frame = pd.DataFrame(payload["cells"], columns=payload["columns"], index=payload["rows"])
        return cls(_as_text(frame))

    def __len__(self) -> int:
        return len(self.frame)


def _normalise_header(name: object) -> str:
    return str(name).strip().lower().replace(" ", "_").replace("-", "_")


def _as_text(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.fillna("").astype(str).apply(lambda column: column.str.strip())


def _table_from_frame(raw: pd.DataFrame) -> ParsedTable:
    """Normalise headers, drop blank rows and number rows as a spreadsheet does."""
    raw = raw.copy()
    raw.columns = [_normalise_header(name) for name in raw.columns]
    raw.index = range(FIRST_DATA_ROW, FIRST_DATA_ROW + len(raw))
    frame = _as_text(raw)
    unnamed = [c for c in frame.columns if c.startswith("unnamed:") or c == ""]
    # A trailing delimiter makes an empty, headerless column: drop it, but not one with data.
    for column in unnamed:
        if (frame[column] == "").all():
            frame = frame.drop(columns=column)
        else:
            position = list(raw.columns).index(column) + 1
            raise ImportFileError(f"Column {position} has values but no header.")
    duplicated = sorted({c for c in frame.columns if list(frame.columns).count(c) > 1})
    if duplicated:
        raise ImportFileError(f"These columns appear more than once: {', '.join(duplicated)}.")
    frame = frame[(frame != "").any(axis=1)]
    if frame.empty:
        raise ImportFileError("The table has a header but no rows.")
    if len(frame) > MAX_ROWS:
        raise ImportFileError(f"At most {MAX_ROWS} rows per import; this table has {len(frame)}.")
    return ParsedTable(frame)


def _delimiter_of(text: str) -> str:
    header = text.lstrip("\ufeff").splitlines()[0] if text.strip() else ""
    return max(["\t", ";", ","], key=header.count) if header else ","


def parse_text(text: str) -> ParsedTable:
    """Rows pasted from a spreadsheet (tab-separated) or written as CSV, header first."""
    if not text.strip():
        raise ImportFileError("Paste a header row and at least one row.")
    try:
        check_text_shape(text.strip("\n"), _delimiter_of(text))
        raw = pd.read_csv(
            io.StringIO(text.strip("\n")),
            sep=_delimiter_of(text),
            dtype=str,
            keep_default_na=False,
            skipinitialspace=True,
            skip_blank_lines=False,  # keep row numbers equal to the file's lines
        )
    except (pd.errors.ParserError, pd.errors.EmptyDataError, csv.Error, ValueError) as exc:
        raise ImportFileError(f"Could not read the rows: {exc}") from exc
    return _table_from_frame(raw)


def _decode(content: bytes) -> str:
    try:
        return content.decode("utf-8-sig")
    except UnicodeDecodeError:
        # Excel on Windows saves CSV in the ANSI code page.
        return content.decode("cp1252", errors="replace")


def parse_upload(uploaded) -> ParsedTable:
    """A CSV (or TSV/TXT) or XLSX upload (first sheet) as a table."""
    if uploaded.size > MAX_UPLOAD_BYTES:
        raise ImportFileError(f"The file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MB.")
    name = (uploaded.name or "").lower()
    content = uploaded.read()
    if name.endswith((".xlsx", ".xlsm")):
        try:
            check_xlsx_archive(io.BytesIO(content), max_uncompressed_bytes=MAX_XLSX_INFLATED_BYTES)
        except UnsafeArchive as exc:
            raise ImportFileError(f"Could not read the XLSX file: {exc}.") from exc
        try:
            raw = read_first_sheet(content)  # streamed; the sheet's size checked first
        except XLSX_READ_ERRORS as exc:
            raise ImportFileError(f"Could not read the XLSX file: {exc}") from exc
        return _table_from_frame(raw)
    if name.endswith((".csv", ".tsv", ".txt")):
        try:
            check_text(content)
        except ValueError as exc:
            raise ImportFileError(str(exc)) from exc
        return parse_text(_decode(content))
    raise ImportFileError("Upload a .csv or .xlsx file.")

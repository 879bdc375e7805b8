"""Bulk import of inventory objects from CSV, XLSX or pasted rows (HackSoft-style services).

Two steps, both driven from a `ParsedTable` (the file's cells as text):

- `preview_import(kind, table)` converts and validates every row and saves nothing: types are
  converted with pandas column by column, parents, catalog names and existing objects are looked
  up in one query per level, then each row goes through the model's `full_clean()`;
- `commit_import(kind, table)` repeats the validation inside one transaction and saves every
  row, or raises `ImportRejected` and saves nothing.

Rows are matched on natural keys (site name; site + cluster; site + cluster + pool; that pool
path + node group name; accelerator catalog name), so importing the same file twice updates
instead of duplicating. Row numbers count the header as row 1, as a spreadsheet does.

In a column that is present, an empty cell means "no value" (null, empty text or the model
default); a column left out of the file leaves that field of existing objects unchanged.

The package's modules: ``kinds`` (what can be imported), ``reading`` (files and pasted text to
a :class:`ParsedTable`), ``rows`` (preview and commit) and ``templates``; import from here.
"""

from inventory.imports.kinds import (
    CREATE,
    FIRST_DATA_ROW,
    KINDS,
    MAX_ROWS,
    MAX_UPLOAD_BYTES,
    MAX_XLSX_INFLATED_BYTES,
    UNCHANGED,
    UPDATE,
    ImportFileError,
    ImportKind,
    get_kind,
)
from inventory.imports.reading import ParsedTable, parse_text, parse_upload
from inventory.imports.rows import (
    ImportPreview,
    ImportRejected,
    ImportResult,
    ImportRow,
    RowError,
    check_columns,
    commit_import,
    preview_import,
)
from inventory.imports.templates import ColumnHelp, column_help, template_csv, template_xlsx

__all__ = [
    "CREATE",
    "FIRST_DATA_ROW",
    "KINDS",
    "MAX_ROWS",
    "MAX_UPLOAD_BYTES",
    "MAX_XLSX_INFLATED_BYTES",
    "UNCHANGED",
    "UPDATE",
    "ColumnHelp",
    "ImportFileError",
    "ImportKind",
    "ImportPreview",
    "ImportRejected",
    "ImportResult",
    "ImportRow",
    "ParsedTable",
    "RowError",
    "check_columns",
    "column_help",
    "commit_import",
    "get_kind",
    "parse_text",
    "parse_upload",
    "preview_import",
    "template_csv",
    "template_xlsx",
]

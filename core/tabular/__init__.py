"""The spreadsheet stack: column specs, ?fields=/?format= on every list, CSV/XLSX renderers and
the one cell-safety rule every spreadsheet writer goes through (cellsafety)."""

"""The usage import in steps: rows (lookups, chunk -> record columns), writers (bulk
upserts), sreport storage and checks; driven by :mod:`accounting.services` (a file's preview:
:mod:`accounting.usage_preview`)."""

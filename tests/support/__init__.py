"""What the tests share: builders of test data, fixture plugins, helpers, and the generators of
their data. Test modules and conftests import from here only, never from one another.

- `builders`: users, the 16-card "alpha" cluster and its pools, usage imports, the reports'
  fleet, report schedules, plan payloads, exchange rates.
- `inline`: an analysis or a plan run in this process, as the worker runs it (no broker).
- `demo_site`: the whole demo computed (usage, analysis, plan, report) and its pages.
- `fixtures/*`: the shared pytest fixtures, registered once by tests/conftest.py.
- data: `alpha_usage` (Slurm text of alpha's day), `sacct_pitfalls` (the parsers' hard
  cases), `usage_data` (the dashboards' usage), `dcgm` (a dcgm-exporter history and its
  figures), `engine_rows`, `capacity_inputs`, `inference_inputs` (engine inputs), `hostile`
  (bad files and values).
- helpers: `polling`, `memcap` (memory caps), `tabular` (reading exports back), `charts`,
  `browser`, `prometheus`, `smtp`, `net`, `workers` (worker processes, broker outages),
  `processes` (Python in a clean process); `worker_settings` (the settings of worker
  subprocesses).

Django is imported inside functions wherever a module may load without it: the pure-core
suites (tests/engine, tests/accounting/parsing) also run with ``-p no:django``.
"""

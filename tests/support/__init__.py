"""What the tests share: builders of test data, fixture plugins, helpers, and the data files'
generators. Test modules and conftests import from here only, never from one another.

- `builders`: users, the 16-card "alpha" cluster, pools, usage, the reports' fleet,
  schedules, plan payloads.
- `inline`: an analysis or a plan run in this process, as the worker runs it (no broker).
- `fixtures/*`: the shared pytest fixtures, registered once by tests/conftest.py.
- data: `alpha_usage` (Slurm text of alpha's day), `sacct_pitfalls` (the parsers' hard
  cases), `usage_data` (the dashboards' usage), `dcgm` (a dcgm-exporter history),
  `engine_rows`, `capacity_inputs`, `inference_inputs` (engine inputs).
- helpers: `polling`, `memcap`, `hostile` (bad files), `tabular` (reading exports back),
  `browser`, `charts`, `prometheus`, `smtp`, `workers`, `processes`;
  `worker_settings` (the settings of worker subprocesses).

Django is imported inside functions wherever a module may load without it: the pure-core
suites (tests/engine, tests/accounting/parsing) also run with ``-p no:django``.
"""

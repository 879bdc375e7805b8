"""Pure computing core of the efficiency engine (no Django, DRF or Celery).

``effective_utilization = energy × mfu × scaling × effective_time × utilization``

Import from the submodules: ``defaults`` (the one table of assumptions and override
layering), ``factors`` (energy, MFU, utilization), ``scaling``, ``reliability``
(effective training time), ``heterogeneous`` (the bucket effect), ``aggregate``
(attribution and scope roll-ups) and ``evaluate`` (the vectorised entry point
``evaluate_pools`` and the scalar ``evaluate_pool``).
See docs/efficiency-model.md.
"""

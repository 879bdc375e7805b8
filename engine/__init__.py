"""Pure computing core of the efficiency engine (no Django, DRF or Celery).

``effective_utilization = energy × mfu × scaling × effective_time × utilization``

Public API: the modules below (this package re-exports nothing; import from them).

    evaluate        the vectorised entry point ``evaluate_pools`` and the scalar ``evaluate_pool``
    records         typed rows of the frames that cross the boundary: node groups, the pool
                    frame, the analysis result, the plan option
    defaults        the one table of assumptions and override layering
    factors         energy, MFU and utilization, with their provenance
    scaling         parallel scaling: speed-up tables and the communication model
    reliability     failures, checkpoints and effective training time
    heterogeneous   mixed card models and the bucket effect
    aggregate       waste attribution and roll-ups (pool → cluster → site → fleet)
    cost            cost, energy and CO₂ of a pool over a period; chargeback to teams
    usage           measured utilization and effective time from usage records
    coverage        coverage of measured usage; measured or planned
    memory          training memory: model state (ZeRO) and activations
    parallelism     tensor × pipeline × data parallel splits
    steptime        time of one training step of a split
    sensitivity     tornado data and improvement levers with payback
    limits          physical ranges of the inputs and the allocation budget
    segments        segment reductions over integer group codes
    capacity        package: the capacity planner (its ``__all__``)
    inference       package: serving capacity (its ``__all__`` and modules)
    steps           package: the steps of ``evaluate_pools``, one module per factor

See docs/efficiency-model.md.
"""

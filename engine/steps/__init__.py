"""The steps of :func:`engine.evaluate.evaluate_pools`, one module per factor.

Each step is pure and vectorised over pools (numpy arrays, no Django) and returns a
:class:`~engine.steps.context.FactorStep`: the factor's value, which input produced
it (basis) with its provenance, and the defaults it used. The precedence rule of a factor
(measured > entered > modeled > default) sits in its step, beside the kernel it calls:

    context         read and check node groups and pools, resolve defaults
    mfu             per node group, then per pool (peak-weighted)
    energy          1 / PUE
    effective_time  the failure/checkpoint model, then job logs over it
    bucket          card-model groups, the four heterogeneous strategies, the one run
    scaling         job shape, split jobs, speed-up tables, the scaling factor
    utilization     allocated / available card-hours
    attribution     product, cost and the waste split over the factors

These modules are the package's public API (it re-exports nothing); callers outside the
engine use :func:`engine.evaluate.evaluate_pools`, which composes them.

Formulas and their published sources: docs/efficiency-model.md.
"""

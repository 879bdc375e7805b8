"""A live Slurm source: a cluster's slurmrestd pulled on a schedule (docs/usage-import.md,
"Live from slurmrestd").

* ``cursor``: the window a pull asks for, the next cursor and the back-off (pure);
* ``client``: the jobs query through core.outbound, with fixed failure texts;
* ``services``: queue a pull, run it (parse, upsert, record success or failure);
* ``tasks``: the pull task and the beat step that queues the due sources.

The model, :class:`accounting.slurmrestd_source.SlurmrestdSource`, lives beside
accounting.models (which imports it) so this package imports it without a cycle.
"""

"""One job framework for every background job of the app (docs/jobs.md).

* ``models``: the abstract durable job (status, progress, run id, heartbeat, error, timings)
  and the task delivery ledger;
* ``lifecycle``: queue a new run, mark it running, progress, heartbeat, finish, fail, each
  guarded by the run id;
* ``dispatch``: the one way to queue a task, surviving a broker outage;
* ``registry``: what each app registers in its ``AppConfig.ready`` (job kinds);
* ``recovery`` and ``quarantine``: jobs of dead workers re-sent, poison tasks stopped.

Names no app model: apps describe their jobs to the registry.
"""

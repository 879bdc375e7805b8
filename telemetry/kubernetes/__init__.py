"""GPU allocation from Kubernetes: kube-state-metrics in a cluster's Prometheus, pulled on a
schedule and written as usage records (docs/kubernetes-usage.md).

* ``models``: the source (settings, cursor, health, its fetch as a durable job) and its
  node → node group and namespace → team rules;
* ``queries``: the PromQL sent and the GPU resource names (pure);
* ``segments``: step samples → running segments → usage rows (pure pandas);
* ``services``: queue a fetch, run it, record success or failure, the one-source rule;
* ``tasks``: the fetch task and the beat step that queues the due sources.
"""

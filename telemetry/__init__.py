"""GPU telemetry: DCGM metrics from Prometheus (or a text export) rolled up per day."""

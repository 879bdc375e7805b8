"""Serving capacity: memory, roofline timing, sizing, energy and cost (docs/inference.md).

Pure numpy/pandas like the training planner; every function broadcasts over option arrays.
"""

from engine.inference.sizing import InferenceWorkload, evaluate_inference

__all__ = ["InferenceWorkload", "evaluate_inference"]

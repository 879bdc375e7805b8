"""The engine's input limits (engine.limits): called directly, without a serializer, the
engine refuses huge inputs by field before it allocates; every limit is finite, ordered and
documented in docs/deployment.md. (Bounded work per request: tests/core/test_bounds.py.)"""

from __future__ import annotations

import pytest

from engine.limits import LIMITS, EngineInputError
from tests.support.memcap import run_capped


def test_the_engine_refuses_a_huge_grid_before_allocating():
    """Called directly (no serializer), the engine still sizes its grid first."""
    result = run_capped(
        """
        from engine.limits import EngineInputError
        from engine.parallelism import enumerate_splits
        try:
            enumerate_splits([1024], [8], layers=10**9, heads=96, global_batch=1536)
        except EngineInputError as exc:
            print(sorted(exc.errors))
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['layers']"


def test_the_engine_refuses_huge_workloads_by_field():
    from engine.capacity import TrainingWorkload

    with pytest.raises(EngineInputError) as refused:
        TrainingWorkload(params=1e30, tokens=1e308, seq_len=2**63)
    assert {"params", "tokens", "seq_len"} <= set(refused.value.errors)


def test_every_limit_is_finite_and_ordered():
    for name, bound in LIMITS.items():
        assert 0 <= bound.low < bound.high < 1e33, name
        assert bound.unit is not None and bound.why, name


def test_the_deployment_doc_lists_every_limit_as_the_code_has_it():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "deployment.md").read_text()
    section = doc.split("## Input limits", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 5 and cells[0].startswith("`"):
            rows[cells[0].strip("`")] = cells[1:4]
    expected = {
        name: [f"{bound.low:g}", f"{bound.high:g}", bound.unit] for name, bound in LIMITS.items()
    }
    assert rows == expected

"""bandit finds nothing of medium severity or above in the project's sources (config in
pyproject.toml [tool.bandit]); the few `# nosec` lines each say why, and the reason behind
the chart one is checked here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import plotly.graph_objects as go

ROOT = Path(__file__).resolve().parents[2]


def test_bandit_is_clean_at_medium_severity_and_above():
    bandit = Path(sys.executable).parent / "bandit"
    result = subprocess.run(
        [str(bandit), "-c", "pyproject.toml", "-r", ".", "-ll", "-f", "json", "-q"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(result.stdout)
    found = [
        f"{issue['filename']}:{issue['line_number']} {issue['test_id']} {issue['issue_text']}"
        for issue in report["results"]
    ]
    assert found == [], "\n".join(found)
    assert result.returncode == 0, result.stderr
    scanned = {Path(name).parts[0] for name in report["metrics"] if name != "_totals"}
    assert {"config", "inventory", "planner", "accounting", "frontend", "access"} <= scanned
    assert "tests" not in scanned and ".venv" not in scanned


def test_chart_html_escapes_names_that_look_like_markup():
    """frontend/charts.py marks plotly's HTML safe: plotly must escape the data in it."""
    name = "</script><script>alert(1)</script>"
    html = go.Figure(go.Bar(x=[name], y=[1])).to_html(full_html=False, include_plotlyjs=False)
    assert name not in html and "<script>alert" not in html

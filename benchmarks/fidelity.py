"""How far is today's planner from published training runs? The track record, as a table.

Runs every published run of engine/data/published_training_runs.json (the calibration runs
and the held-out ones, and our own single-GPU measurements) through the capacity planner with
only the workload and the cards given, and prints published, modeled, error, whether the
published figure is inside the planner's 10th-90th percentile band, the role and the source;
then the median and worst error, the mean signed error and the band's coverage, for all runs
and by role. With --write it also writes engine/data/track_record.json, the file the "How
accurate is the planner?" page reads (tests/engine/test_track_record.py fails until the file
matches the model again).

Run from the repository root:
    .venv/bin/python benchmarks/fidelity.py [--write]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a plain script

from engine.track_record import (
    TRACK_RECORD_PATH,
    compute_track_record,
    dumps,
    format_table,
)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write", action="store_true", help=f"write {TRACK_RECORD_PATH.name} for the page"
    )
    args = parser.parse_args(argv)
    record = compute_track_record()
    print(format_table(record))
    if args.write:
        TRACK_RECORD_PATH.write_text(dumps(record), encoding="utf-8")
        print(f"\nwrote {TRACK_RECORD_PATH.relative_to(Path.cwd().resolve())}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

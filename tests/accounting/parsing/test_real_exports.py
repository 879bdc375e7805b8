"""sacct files in the layouts real sites export; GPU-hours checked against hand counts.

* ``sacct_xdmod_noheader.txt``: Open XDMoD's 26 fields, ``--noheader --parsable2``.
* ``sacct_snowman_tot.txt``: ``--delimiter=☃``, gpuutil in ``TRESUsageInTot``, MIG.
* ``sacct_allocgres_slurm17.txt``: Slurm 17 ``-p`` (trailing ``|``), ``AllocGRES`` only.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from accounting.parsing import SacctStats, UsageValidationError, read_sacct
from accounting.parsing.delimiters import detect_delimiter
from accounting.parsing.gres import tres_from_gres
from accounting.parsing.layouts import XDMOD_SACCT_COLUMNS, LayoutError, layout_options

FIXTURES = Path(__file__).parent / "fixtures"


def per(frame, column: str) -> dict[str, float]:
    return {
        key: round(value, 6) for key, value in frame.groupby(column)["card_hours"].sum().items()
    }


def test_xdmod_headerless_is_refused_with_the_matching_preset_then_read_with_it():
    with pytest.raises(UsageValidationError) as raised:
        read_sacct(FIXTURES / "sacct_xdmod_noheader.txt")
    assert str(raised.value.issues[0]) == (
        "line 1, column JobID: no header: pass --columns or re-export without --noheader "
        "(line 1 has 26 fields, like the preset 'xdmod': --columns-preset xdmod)"
    )
    stats = SacctStats()
    frame = read_sacct(
        FIXTURES / "sacct_xdmod_noheader.txt", columns=XDMOD_SACCT_COLUMNS, stats=stats
    )
    # 5001: 4 H100 x 4 h = 16; 5003: 8 A100 x 26 h = 208; 5004: 2 H100 x 0.5 h = 1.
    assert per(frame, "account") == {"bio": 1.0, "lattice": 208.0, "physics": 16.0}
    assert per(frame, "accelerator_model") == {"A100 SXM4 40GB": 208.0, "H100 SXM5 80GB": 17.0}
    assert (stats.skipped_without_gpu, stats.skipped_never_started) == (1, 1)
    assert frame.set_index("job_id").loc["5004", "state"] == "cancelled"


def test_snowman_delimiter_is_found_from_the_header_and_gpuutil_read_from_tres_tot():
    frame = read_sacct(FIXTURES / "sacct_snowman_tot.txt")
    # 6001: 8 H100 x 2 h = 16 (typed and untyped gres of one job counted once);
    # 6002: two 3g.20gb MIG slices = 2 x 3/7 card x 7 h = 6.
    assert per(frame, "account") == {"lattice": 6.0, "physics": 16.0}
    assert per(frame, "accelerator_model") == {"A100 SXM4 40GB": 6.0, "H100 SXM5 80GB": 16.0}
    job = frame.set_index("job_id")
    # Step 6001.0: gpuutil 640 summed over its 8 GPUs -> 80 % per card; extern ignored.
    assert job.loc["6001", "gpu_utilization"] == pytest.approx(0.80)
    assert job.loc["6002", "mig_profile"] == "3g.20gb"
    given = read_sacct(FIXTURES / "sacct_snowman_tot.txt", delimiter="☃")
    assert per(given, "account") == per(frame, "account")


def test_slurm17_allocgres_with_trailing_delimiter():
    frame = read_sacct(FIXTURES / "sacct_allocgres_slurm17.txt", default_model="V100 SXM2 32GB")
    # 7001: gpu:v100:4 x 3 h = 12; 7002: gpu:2 x 5 h = 10 (untyped: the cluster's card).
    assert per(frame, "account") == {"bio": 10.0, "physics": 12.0}
    assert per(frame, "accelerator_model") == {"V100 SXM2 32GB": 22.0}


def test_gres_notation_and_delimiter_detection():
    assert tres_from_gres("gpu:k80:2,gpu:p100:1,mic:1") == (
        "gres/gpu:k80=2,gres/gpu:p100=1,gres/gpu=3"
    )
    assert tres_from_gres("gpu:2(IDX:0,2)") == "gres/gpu=2"
    assert tres_from_gres("") == ""
    assert tres_from_gres("gpu:tesla:x") == "gres/gpu=x"
    assert detect_delimiter("JobID;;State;;AllocTRES") == ";;"
    assert detect_delimiter("JobID,JobIDRaw,Cluster\r\n") == ","
    assert detect_delimiter("12345|12345|orion") is None


def test_layout_options_are_checked():
    assert layout_options("sacct", columns_preset="xdmod")["columns"] == list(XDMOD_SACCT_COLUMNS)
    assert layout_options("sacct", columns="JobID,Account%20 , State")["columns"] == [
        "JobID",
        "Account",
        "State",
    ]
    with pytest.raises(LayoutError) as raised:
        layout_options("sreport", columns_preset="xdmod", delimiter=",", time_unit="days")
    assert set(raised.value.errors) == {"columns_preset", "delimiter", "time_unit"}


def test_elapsed_longer_than_end_minus_start_is_refused_by_line():
    text = (
        "JobID|Account|Start|End|Elapsed|State|AllocTRES\n"
        "8001|physics|2025-02-01T08:00:00|2025-02-01T10:00:00|99999999-00:00:00|COMPLETED|"
        "gres/gpu:h100=8,gres/gpu=8\n"
        "8002|physics|2025-02-01T08:00:00|2025-02-01T10:00:00|01:30:00|COMPLETED|"
        "gres/gpu:h100=8,gres/gpu=8\n"
    )
    with pytest.raises(UsageValidationError) as raised:
        read_sacct(io.BytesIO(text.encode()), cluster="orion")
    assert [str(issue) for issue in raised.value.issues] == [
        "line 2, column Elapsed: Elapsed '99999999-00:00:00' is longer than End - Start (2.00 h)"
    ]
    # Shorter than End - Start is suspended time: 8 cards x 1.5 h.
    good = "\n".join(text.splitlines()[::2]) + "\n"
    frame = read_sacct(io.BytesIO(good.encode()), cluster="orion")
    assert frame["card_hours"].tolist() == [12.0]


def test_gpuutil_meaning_follows_the_slurm_version():
    text = (
        "JobID|Account|Start|End|Elapsed|State|AllocTRES|TRESUsageInTot\n"
        "8101|bio|2025-02-01T08:00:00|2025-02-01T10:00:00|02:00:00|COMPLETED|"
        "gres/gpu:h100=4,gres/gpu=4|\n"
        "8101.0|bio|2025-02-01T08:00:00|2025-02-01T10:00:00|02:00:00|COMPLETED|"
        "gres/gpu:h100=4,gres/gpu=4|cpu=02:00:00,gres/gpuutil=80\n"
    )

    def utilization(**options: object) -> float:
        frame = read_sacct(io.BytesIO(text.encode()), cluster="orion", **options)
        return float(frame.loc[0, "gpu_utilization"])

    # Slurm >= 24.05.1: 80 is the sum over 4 GPUs -> 20 % each; before: one GPU's 80 %.
    assert utilization() == pytest.approx(0.20)
    assert utilization(gpuutil_summed=False) == pytest.approx(0.80)

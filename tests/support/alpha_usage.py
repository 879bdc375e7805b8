"""Real-shaped Slurm text of one day on the 16-card "alpha" cluster
(`tests.support.builders.alpha_cluster`), and its sreport and CSV forms.

The cluster: site "Test DC" (air, PUE 1.25, 0.20 USD/kWh, 400 gCO₂/kWh), cluster "alpha"
(commissioned 2024-01-01, 30,000 USD per card over 5 years), one pool "h100" of 2 nodes × 8
H100 SXM5 80GB (700 W TDP) = 16 cards.

The day 2024-03-01 (UTC) has three GPU jobs (plus steps, a pending job and a CPU-only job):

    job   team    cards  start  end    hours  state      card-hours
    1001  team-a  8      10:00  16:00  6      COMPLETED  48
    1002  team-b  4      00:00  12:00  12     COMPLETED  48
    1003  team-c  8      18:00  20:00  2      NODE_FAIL  16
"""

from __future__ import annotations

import datetime as dt

DAY_START = dt.datetime(2024, 3, 1, tzinfo=dt.UTC)
DAY_END = dt.datetime(2024, 3, 2, tzinfo=dt.UTC)

SACCT_HEADER = (
    "JobID|JobIDRaw|Cluster|Partition|Account|User|Submit|Start|End|Elapsed|State|NNodes|"
    "AllocTRES|NodeList|TRESUsageInAve"
)
H100_8 = "billing=112,cpu=112,gres/gpu:h100=8,gres/gpu=8,mem=1000G,node=1"
H100_4 = "billing=56,cpu=56,gres/gpu:h100=4,gres/gpu=4,mem=500G,node=1"
SACCT_LINES = [
    # line 2-4: team-a, 8 cards for 6 h, completed; steps fold into it (gpuutil 680/8 = 85 %).
    "1001|1001|alpha|h100|team-a|ann|2024-03-01T09:55:00|2024-03-01T10:00:00|"
    f"2024-03-01T16:00:00|06:00:00|COMPLETED|1|{H100_8}|gpu001|",
    "1001.batch|1001.batch|alpha||team-a||2024-03-01T10:00:00|2024-03-01T10:00:00|"
    f"2024-03-01T16:00:00|06:00:00|COMPLETED|1|{H100_8}|gpu001|cpu=00:01:00,mem=2G",
    "1001.0|1001.0|alpha||team-a||2024-03-01T10:00:05|2024-03-01T10:00:05|2024-03-01T16:00:00|"
    f"05:59:55|COMPLETED|1|{H100_8}|gpu001|cpu=10:00:00,gres/gpuutil=680,mem=200G",
    # line 5: team-b, 4 cards for 12 h, completed.
    "1002|1002|alpha|h100|team-b|bob|2024-02-29T23:50:00|2024-03-01T00:00:00|"
    f"2024-03-01T12:00:00|12:00:00|COMPLETED|1|{H100_4}|gpu002|",
    # line 6: team-c, 8 cards for 2 h, the node failed.
    "1003|1003|alpha|h100|team-c|cy|2024-03-01T17:00:00|2024-03-01T18:00:00|"
    f"2024-03-01T20:00:00|02:00:00|NODE_FAIL|1|{H100_8}|gpu001|",
    # line 7: pending (never held cards): skipped.
    "1004|1004|alpha|h100|team-a|ann|2024-03-01T21:00:00|Unknown|Unknown|00:00:00|PENDING|1||"
    "None assigned|",
    # line 8: CPU-only job: skipped.
    "1005|1005|alpha|cpu|team-a|ann|2024-03-01T09:00:00|2024-03-01T10:00:00|"
    "2024-03-01T11:00:00|01:00:00|COMPLETED|1|billing=4,cpu=4,mem=16G,node=1|cpu001|",
]
SREPORT_TEXT = """\
--------------------------------------------------------------------------------
Cluster Utilization 2024-03-01T00:00:00 - 2024-03-01T23:59:59
Usage reported in TRES Hours
--------------------------------------------------------------------------------
Cluster|TRES Name|Allocated|Down|PLND Down|Idle|Planned|Reported
alpha|gres/gpu|112|24|48|200|0|384
"""
CSV_TEXT = """\
cluster,job_id,cards,start,end,state,accelerator_model,team,user,mfu
alpha,j-1,8,2024-03-01T10:00:00Z,2024-03-01T16:00:00Z,completed,h100,team-a,ann,45%
alpha,j-2,4,2024-03-01T00:00:00Z,2024-03-01T12:00:00Z,COMPLETED,H100 SXM5 80GB,team-b,bob,
"""


def sacct_text(lines: list[str] | None = None) -> str:
    return "\n".join([SACCT_HEADER, *(SACCT_LINES if lines is None else lines)]) + "\n"


# Who used alpha that day: team-a, and the two teams a team-a viewer must not see.
TEAM = "team-a"
OTHER_TEAMS = ("team-b", "team-c")

"""Real-shaped sacct text with one line per pitfall of Slurm accounting, for the parsers'
tests (pure Python: no Django). Each line's comment says which pitfall it is."""

from __future__ import annotations

import io

SACCT_HEADER = (
    "JobID|JobIDRaw|Cluster|Partition|Account|User|Submit|Start|End|Elapsed|State|NNodes|"
    "ReqTRES|AllocTRES|NodeList|TRESUsageInAve"
)
H100_NODE = "billing=112,cpu=112,gres/gpu:h100=8,gres/gpu=8,mem=1000G,node=1"
# One line per pitfall; the comment after each line number says which.
SACCT_LINES = [
    # 2: exclusive job: ReqTRES says 1 GPU, AllocTRES says 8 -> 8 cards, 2.5 h.
    "1001|1001|alpha|h100|team-a|ann|2024-03-01T08:00:00|2024-03-01T10:00:00|2024-03-01T12:30:00"
    f"|02:30:00|COMPLETED|1|billing=1,cpu=1,gres/gpu=1,node=1|{H100_NODE}|gpu001|",
    # 3-5: steps folded into 1001; .0 reports gpuutil summed over 8 GPUs (680 -> 85 %);
    # the extern step's 0 must not drag the mean down.
    "1001.batch|1001.batch|alpha||team-a||2024-03-01T10:00:00|2024-03-01T10:00:00|"
    f"2024-03-01T12:30:00|02:30:00|COMPLETED|1||{H100_NODE}|gpu001|cpu=00:01:00,mem=2G",
    "1001.extern|1001.extern|alpha||team-a||2024-03-01T10:00:00|2024-03-01T10:00:00|"
    f"2024-03-01T12:30:00|02:30:00|COMPLETED|1||{H100_NODE}|gpu001|cpu=00:00:00,gres/gpuutil=0",
    "1001.0|1001.0|alpha||team-a||2024-03-01T10:00:05|2024-03-01T10:00:05|2024-03-01T12:29:55|"
    "02:29:50|COMPLETED|1||cpu=112,gres/gpu:h100=8,gres/gpu=8,node=1|gpu001|"
    "cpu=10:00:00,gres/gpumem=70000M,gres/gpuutil=680,mem=200G",
    # 6: array task 1002_4 (JobIDRaw 1010), MIG 3g.20gb slice = 3/7 card, Elapsed MM:SS.mmm.
    "1002_4|1010|alpha|mig|team-b|bob|2024-03-01T09:00:00|2024-03-01T10:00:00|2024-03-01T10:45:30"
    "|45:30.500|COMPLETED|1|cpu=8,gres/gpu=1,node=1|cpu=8,gres/gpu:a100_3g.20gb=1,gres/gpu=1,"
    "node=1|gpu100|",
    # 7: het component 1003+0 on two nodes, Elapsed with days, TIMEOUT.
    "1003+0|1003|alpha|h100|team-c|cy|2024-03-01T08:00:00|2024-03-01T09:00:00|2024-03-02T11:00:00"
    "|1-02:00:00|TIMEOUT|2|gres/gpu=16|billing=224,cpu=224,gres/gpu:h100=16,gres/gpu=16,node=2|"
    "gpu[001-002]|",
    # 8: het component 1003+1 holding two typed kinds -> two records.
    "1003+1|1004|alpha|mixed|team-c|cy|2024-03-01T08:00:00|2024-03-01T09:00:00|2024-03-02T11:00:00"
    "|1-02:00:00|TIMEOUT|1|gres/gpu=6|cpu=64,gres/gpu:h100=4,gres/gpu:a100_80g=2,gres/gpu=6,"
    "node=1|gpu200|",
    # 9: running job: End Unknown, untyped gres/gpu -> partition default model.
    "1005|1005|alpha|legacy|team-a|ann|2024-03-01T09:00:00|2024-03-01T10:00:00|Unknown|03:15:00|"
    "RUNNING|1|gres/gpu=4|cpu=32,gres/gpu=4,node=1|gpu300|",
    # 10: "CANCELLED by 1234", Elapsed MM:SS.
    "1006|1006|alpha|h100|team-b|bob|2024-03-01T09:00:00|2024-03-01T10:00:00|2024-03-01T10:20:00|"
    f"20:00|CANCELLED by 1234|1|gres/gpu=8|{H100_NODE}|gpu001|",
    # 11-13: --duplicates: a requeued run and the final run share JobIDRaw, Submit differs.
    "1007|1007|alpha|h100|team-b|bob|2024-03-01T09:00:00|2024-03-01T10:00:00|2024-03-01T11:00:00|"
    f"01:00:00|REQUEUED|1|gres/gpu=8|{H100_NODE}|gpu002|",
    "1007|1007|alpha|h100|team-b|bob|2024-03-01T11:00:05|2024-03-01T11:10:00|2024-03-01T13:10:00|"
    f"02:00:00|COMPLETED|1|gres/gpu=8|{H100_NODE}|gpu002|",
    "1007.batch|1007.batch|alpha||team-b||2024-03-01T11:10:00|2024-03-01T11:10:00|"
    f"2024-03-01T13:10:00|02:00:00|COMPLETED|1||{H100_NODE}|gpu002|gres/gpuutil=400",
    # 14: node failure.
    "1008|1008|alpha|h100|team-a|ann|2024-03-01T09:00:00|2024-03-01T10:00:00|2024-03-01T10:30:00|"
    f"00:30:00|NODE_FAIL|1|gres/gpu=8|{H100_NODE}|gpu003|",
    # 15: pending array remainder: skipped.
    "1009_[5-100]|1009|alpha|h100|team-a|ann|2024-03-01T09:00:00|Unknown|Unknown|00:00:00|PENDING|1|"
    "gres/gpu=8||None assigned|",
    # 16: cancelled before it started (Start None): skipped.
    "1011|1011|alpha|h100|team-a|ann|2024-03-01T09:00:00|None|2024-03-01T10:05:00|00:00:00|"
    "CANCELLED by 0|1|gres/gpu=8||None assigned|",
    # 17: CPU-only job: skipped.
    "1012|1012|alpha|cpu|team-a|ann|2024-03-01T09:00:00|2024-03-01T10:00:00|2024-03-01T11:00:00|"
    "01:00:00|COMPLETED|1|cpu=4|billing=4,cpu=4,mem=16G,node=1|cpu001|",
    # 18: untyped GPUs in a partition with no default: model unknown (kept).
    "1013|1013|alpha|misc|team-a|ann|2024-03-01T09:00:00|2024-03-01T10:00:00|2024-03-01T11:00:00|"
    "01:00:00|COMPLETED|1|gres/gpu=2|cpu=8,gres/gpu=2,node=1|gpu400|",
    # 19: OUT_OF_MEMORY counts as failed.
    "1014|1014|alpha|h100|team-c|cy|2024-03-01T09:00:00|2024-03-01T10:00:00|2024-03-01T10:06:00|"
    f"00:06:00|OUT_OF_MEMORY|1|gres/gpu=8|{H100_NODE}|gpu004|",
]
PARTITION_MODELS = {"legacy": "A100 SXM4 80GB"}


def sacct_text(*, header: bool = True, newline: str = "\n") -> str:
    lines = ([SACCT_HEADER] if header else []) + SACCT_LINES
    return newline.join(lines) + newline


def as_source(text: str) -> io.BytesIO:
    return io.BytesIO(text.encode("utf-8"))

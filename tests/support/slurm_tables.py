"""Slurm tables and look-alikes as people paste them, for the layout tests (pure: no Django).

Written here after published outputs of ``sacct``/``sreport`` without ``-P`` (their widths
and cuts follow Slurm's ``src/common/print_fields.c``: a header, a dashed line per column, a
space after every column, a text value longer than its column cut to width − 1 characters
and a ``+``, numbers and durations never cut), of site wrappers (``seff``, Princeton's
``jobstats``, a ``jobcharge`` charging report) and of GPU telemetry (a dcgm-exporter
``/metrics`` scrape, ``nvidia-smi --query-gpu`` CSV). Long lines are split only to fit the
source; the joined text is byte for byte what the tool prints.
"""

from __future__ import annotations


def _table(*lines: str) -> str:
    return "\n".join(lines) + "\n"


# sacct --allusers --duplicates --starttime 2025-02-03 --format JobID,JobIDRaw,Cluster,Partition,
#   Account,User,Submit,Start,End,Elapsed,State,NNodes,AllocTRES%80,NodeList
# Jobs: 1001 8 cards 6 h completed (its batch step folds in); 1002 16 cards 1.5 h, State
# "CANCELLED by 1234" cut to CANCELLED+ (its word survives); 1003 4 cards running since
# 14:00 (Elapsed 2 h); 1004 pending. The file's latest time: 1001's End, 16:00.
SACCT_FIXED_WIDTH = _table(
    (
        "JobID        JobIDRaw        Cluster  Partition    Account      User              Su"
        "bmit               Start                 End    Elapsed      State   NNodes         "
        "                                                               AllocTRES        Node"
        "List "
    ),
    (
        "------------ ------------ ---------- ---------- ---------- --------- ---------------"
        "---- ------------------- ------------------- ---------- ---------- -------- --------"
        "------------------------------------------------------------------------ -----------"
        "---- "
    ),
    (
        "1001         1001              orion       h100     team-a       ann 2025-02-03T09:5"
        "5:00 2025-02-03T10:00:00 2025-02-03T16:00:00   06:00:00  COMPLETED        1         "
        "         billing=112,cpu=112,gres/gpu:h100=8,gres/gpu=8,mem=1000G,node=1          gp"
        "u001 "
    ),
    (
        "1001.batch   1001.batch        orion                team-a           2025-02-03T10:0"
        "0:00 2025-02-03T10:00:00 2025-02-03T16:00:00   06:00:00  COMPLETED        1         "
        "                     cpu=112,gres/gpu:h100=8,gres/gpu=8,mem=1000G,node=1          gp"
        "u001 "
    ),
    (
        "1002         1002              orion       h100     team-b       bob 2025-02-03T11:0"
        "0:00 2025-02-03T12:00:00 2025-02-03T13:30:00   01:30:00 CANCELLED+        2         "
        "       billing=224,cpu=224,gres/gpu:h100=16,gres/gpu=16,mem=2000G,node=2    gpu[002-"
        "003] "
    ),
    (
        "1003         1003              orion       h100     team-c        cy 2025-02-03T12:0"
        "0:00 2025-02-03T14:00:00             Unknown   02:00:00    RUNNING        1         "
        "                     billing=56,cpu=56,gres/gpu:h100=4,gres/gpu=4,node=1          gp"
        "u004 "
    ),
    (
        "1004         1004              orion       h100     team-a       ann 2025-02-03T15:0"
        "0:00             Unknown             Unknown   00:00:00    PENDING        1         "
        "                                                                           None assi"
        "gned "
    ),
)

# The same kind of export with sacct's default widths: AllocTRES (10) cuts every value, a
# State OUT_OF_MEMORY (13) loses its word; a cut JobName is not read and does not matter.
SACCT_FIXED_WIDTH_CUT = _table(
    (
        "JobID         Partition    Account               Start                 End    Elapse"
        "d      State  AllocTRES    JobName "
    ),
    (
        "------------ ---------- ---------- ------------------- ------------------- ---------"
        "- ---------- ---------- ---------- "
    ),
    (
        "2001               h100     team-a 2025-02-03T10:00:00 2025-02-03T16:00:00   06:00:0"
        "0  COMPLETED billing=1+ pretrain-+ "
    ),
    (
        "2002               h100     team-b 2025-02-03T12:00:00 2025-02-03T13:00:00   01:00:0"
        "0 OUT_OF_ME+ gres/gpu=8       eval "
    ),
)

# A 10-day job: Elapsed "10-02:03:04" is 11 characters in a 10-wide column, never cut, so it
# pushes State and AllocTRES one character to the right.
SACCT_FIXED_WIDTH_PUSHED = _table(
    (
        "JobID                      Start                 End    Elapsed      State          "
        "                      AllocTRES "
    ),
    (
        "------------ ------------------- ------------------- ---------- ---------- ---------"
        "------------------------------- "
    ),
    (
        "2101         2025-01-01T00:00:00 2025-01-11T02:03:04 10-02:03:04  COMPLETED        g"
        "res/gpu:h100=8,gres/gpu=8,node=1 "
    ),
)

# --format=JobID,Start%10,...,TRESUsageInAve%10: a time cut silently to its date, and a
# header name cut to "TRESUsageI" (TRESUsageInAve or TRESUsageInMax ...?).
SACCT_FIXED_WIDTH_NARROW = _table(
    (
        "JobID             Start                 End    Elapsed      State                   "
        "             AllocTRES TRESUsageI "
    ),
    (
        "------------ ---------- ------------------- ---------- ---------- ------------------"
        "---------------------- ---------- "
    ),
    (
        "2201         2025-01-01 2025-01-01T02:00:00   02:00:00  COMPLETED        gres/gpu:h1"
        "00=8,gres/gpu=8,node=1            "
    ),
)

# sreport -t hours -T gres/gpu cluster AccountUtilizationByUser start=2025-02-01 end=2025-03-01
# (no -P). Users: ann 1800 and bob 1200 in physics, cy 2280 in chemistry; a Proper Name is cut
# (not read).
SREPORT_ACCOUNTS_FIXED_WIDTH = _table(
    "--------------------------------------------------------------------------------",
    ("Cluster/Account/User Utilization 2025-02-01T00:00:00 - 2025-02-28T23:59:59 (2419200 secs)"),
    "Usage reported in TRES Hours",
    "--------------------------------------------------------------------------------",
    "  Cluster         Account     Login     Proper Name      TRES Name     Used ",
    "--------- --------------- --------- --------------- -------------- -------- ",
    "    orion            root                                 gres/gpu     5280 ",
    "    orion         physics                                 gres/gpu     3000 ",
    "    orion         physics       ann Ann Anderson-S+       gres/gpu     1800 ",
    "    orion         physics       bob           Bob B       gres/gpu     1200 ",
    "    orion       chemistry                                 gres/gpu     2280 ",
    "    orion       chemistry        cy            Cy C       gres/gpu     2280 ",
)

# sreport -t hours -T gres/gpu cluster utilization (no -P) with a MIG TRES name longer than
# the 14-wide TRES Name column.
SREPORT_FIXED_WIDTH_CUT = _table(
    "--------------------------------------------------------------------------------",
    "Cluster Utilization 2025-02-01T00:00:00 - 2025-02-28T23:59:59",
    "Usage reported in TRES Hours",
    "--------------------------------------------------------------------------------",
    ("  Cluster      TRES Name    Allocated       Down PLND Down       Idle  Planned   Reported "),
    ("--------- -------------- ------------ ---------- --------- ---------- -------- ---------- "),
    ("    orion       gres/gpu         5280         96        48       2640        0       8064 "),
    ("    orion gres/gpu:a100+          120          0         0         48        0        168 "),
)

# sacct -n -P --format JobIDRaw,Account,User,Partition,Start,ElapsedRaw,TimelimitRaw,State,
#   AllocTRES, as a site's wrapper exports it: Elapsed in seconds, the limit in minutes.
RAW_COLUMNS = "JobIDRaw,Account,User,Partition,Start,ElapsedRaw,TimelimitRaw,State,AllocTRES"
SACCT_RAW_SECONDS = _table(
    "3001|team-a|ann|h100|2025-02-03T10:00:00|5400|120|COMPLETED|gres/gpu:h100=8,gres/gpu=8",
    "3002|team-b|bob|h100|2025-02-03T11:00:00|86400|UNLIMITED|TIMEOUT|gres/gpu:h100=4,gres/gpu=4",
    "3003|team-b|bob|h100|2025-02-03T12:00:00|600|Partition_Limit|FAILED|gres/gpu=2",
)

# seff 4242
SEFF = _table(
    "Job ID: 4242",
    "Cluster: orion",
    "User/Group: ann/physics",
    "State: COMPLETED (exit code 0)",
    "Nodes: 1",
    "Cores per node: 16",
    "CPU Utilized: 10:12:33",
    "CPU Efficiency: 63.79% of 16:00:00 core-walltime",
    "Job Wall-clock time: 01:00:00",
    "Memory Utilized: 40.50 GB",
    "Memory Efficiency: 31.64% of 128.00 GB",
)

# jobstats 4243 (Princeton's Jobstats)
JOBSTATS = _table(
    "",
    "================================================================================",
    "                              Slurm Job Statistics",
    "================================================================================",
    "         Job ID: 4243",
    "  NetID/Account: ann/physics",
    "       Job Name: train",
    "          State: COMPLETED",
    "          Nodes: 1",
    "      CPU Cores: 16",
    "     CPU Memory: 128GB (8GB per CPU-core)",
    "           GPUs: 4",
    "  QOS/Partition: normal/h100",
    "        Cluster: orion",
    "     Start Time: Mon Feb 3, 2025 at 10:00 AM",
    "       Run Time: 06:00:00",
    "     Time Limit: 1-00:00:00",
    "",
    "                              Overall Utilization",
    "================================================================================",
    "  CPU utilization  [|||||||||||                                    23%]",
    "  GPU utilization  [||||||||||||||||||||||||||||||||||||||||       81%]",
)

# A site's jobcharge report: money (service units) per job, not cards and times.
JOBCHARGE = _table(
    "jobcharge report for account physics, 2025-02-01 to 2025-02-28",
    "JobID      User   Partition  Elapsed    GPUs  Charge (SUs)",
    "4244       ann    h100       06:00:00   8     48.00",
    "4245       bob    h100       01:30:00   16    24.00",
    "Total charge: 72.00 SUs",
)

# curl -s gpu001:9400/metrics: one scrape, samples without timestamps.
_LABELS = (
    'gpu="0",UUID="GPU-5fd4a1c2-0000-0000-0000-000000000000",device="nvidia0",'
    'modelName="NVIDIA H100 80GB HBM3",Hostname="gpu001"'
)
DCGM_SCRAPE = _table(
    "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).",
    "# TYPE DCGM_FI_DEV_GPU_UTIL gauge",
    f"DCGM_FI_DEV_GPU_UTIL{{{_LABELS}}} 87",
    "# HELP DCGM_FI_PROF_PIPE_TENSOR_ACTIVE Ratio of cycles the tensor (HMMA) pipe is active.",
    "# TYPE DCGM_FI_PROF_PIPE_TENSOR_ACTIVE gauge",
    f"DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{{{_LABELS}}} 0.412345",
    "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).",
    "# TYPE DCGM_FI_DEV_POWER_USAGE gauge",
    f"DCGM_FI_DEV_POWER_USAGE{{{_LABELS}}} 612.450000",
)

# nvidia-smi --query-gpu=timestamp,name,pci.bus_id,utilization.gpu,memory.used,power.draw
#   --format=csv -l 60
NVIDIA_SMI_CSV = _table(
    "timestamp, name, pci.bus_id, utilization.gpu [%], memory.used [MiB], power.draw [W]",
    "2025/02/03 10:00:00.123, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 87 %, 61234 MiB, 612.45 W",
    "2025/02/03 10:01:00.125, NVIDIA H100 80GB HBM3, 00000000:18:00.0, 91 %, 61234 MiB, 640.10 W",
)

"""Run hostile-input reproductions under a memory cap, so a blow-up fails the test, not the machine.

Two ways:
- `address_space_cap()` lowers this process's RLIMIT_AS soft limit to what it maps now plus a
  headroom (1 GiB by default) for the duration of a block; an allocation past it raises
  MemoryError inside the request instead of growing the process. The limit is restored after.
- `run_capped(code)` runs Python code in a child process whose address space is capped outright
  (1 GiB by default), for the pure core (engine, parsers) that needs no test database.
"""

from __future__ import annotations

import resource
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path

GIB = 1 << 30
REPO_ROOT = Path(__file__).resolve().parents[2]


def mapped_bytes() -> int:
    """This process's current virtual size (VmSize), in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmSize:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("VmSize not found in /proc/self/status")


@contextmanager
def address_space_cap(headroom_bytes: int = GIB):
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = mapped_bytes() + headroom_bytes
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield limit
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _cap_child(cap_bytes: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (cap_bytes, cap_bytes))

    return apply


def run_capped(
    code: str, cap_bytes: int = GIB, timeout_s: float = 60
) -> subprocess.CompletedProcess:
    """Run `code` with `python -c` from the repository root under an address-space cap."""
    return subprocess.run(  # our own interpreter and our own code
        [sys.executable, "-c", textwrap.dedent(code)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        preexec_fn=_cap_child(cap_bytes),  # no threads were started before exec
        check=False,
    )

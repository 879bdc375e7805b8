"""Uploaded text exports are read in blocks (telemetry.export_text): memory follows one block
and the samples kept, not the file; lines cut by a block edge and line numbers come out as if
read whole; files over the limits, or not text, are refused while they are read."""

from __future__ import annotations

import gzip
import io

import pytest

from tests.support import dcgm
from tests.support.memcap import run_capped

MIB = 2**20

# A child reads EXPORT_MIB of samples made as they are read (never in memory as a file) under
# an address-space cap: reading the export whole, as a string split into lines, would need
# several times the file; reading it in blocks needs one block.
EXPORT_MIB, CAP_MIB = 64, 448
BOUNDED_READ = """
import io
from telemetry.export_text import read_export

LINE = ('DCGM_FI_DEV_POWER_USAGE{{gpu="{g}",UUID="GPU-{h}-{g}",Hostname="gpu{h:04d}",'
        'modelName="NVIDIA H100 80GB HBM3"}} 312.5 {t}\\n')


class Export(io.RawIOBase):
    def __init__(self, total):
        self.total, self.given, self.pending, self.k = total, 0, b"", 0

    def readable(self):
        return True

    def readinto(self, buffer):
        while len(self.pending) < len(buffer) and self.given < self.total:
            lines = range(self.k, self.k + 20000)
            block = "".join(
                LINE.format(g=k % 8, h=(k // 8) % 250, t=1772409660 + 60 * (k // 2000))
                for k in lines
            ).encode()
            self.k, self.given, self.pending = self.k + 20000, self.given + len(block), (
                self.pending + block
            )
        n = min(len(buffer), len(self.pending))
        buffer[:n], self.pending = self.pending[:n], self.pending[n:]
        return n


frame = read_export(io.BufferedReader(Export(EXPORT_MIB * 2**20)))
print(len(frame), frame["value"].sum())
"""


def test_a_large_export_is_read_in_bounded_memory():
    result = run_capped(
        BOUNDED_READ.replace("EXPORT_MIB", str(EXPORT_MIB)), cap_bytes=CAP_MIB * MIB, timeout_s=240
    )
    assert result.returncode == 0, result.stderr[-2000:]
    samples, total = result.stdout.split()
    assert int(samples) > 400_000  # ~140 bytes a line
    assert float(total) == pytest.approx(312.5 * int(samples))


def test_blocks_cut_lines_anywhere_and_give_the_same_samples(monkeypatch):
    from telemetry import export_text

    lines = dcgm.openmetrics().splitlines(keepends=True)
    data = "".join([*lines[:3000], "# EOF\n"]).encode()
    whole = export_text.read_export(io.BytesIO(data))
    monkeypatch.setattr(export_text, "BLOCK_BYTES", 7919)  # a prime: edges fall mid-line
    in_blocks = export_text.read_export(io.BytesIO(data))
    assert len(whole) == len(in_blocks) > 0
    assert whole.astype(str).equals(in_blocks.astype(str))


def test_a_bad_line_is_named_by_its_number_across_blocks(monkeypatch):
    from telemetry import export_text

    good = 'DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="h1"} 300 1772409660000\n'
    text = good * 500 + 'DCGM_FI_DEV_POWER_USAGE{gpu="0",Hostname="h1"} watts 1772409720000\n'
    monkeypatch.setattr(export_text, "BLOCK_BYTES", 4096)
    with pytest.raises(export_text.ExportError, match="line 501: not a number"):
        export_text.read_export(io.BytesIO(text.encode()))


def test_an_export_over_the_size_limit_is_refused_while_read(monkeypatch):
    from telemetry import export_text

    monkeypatch.setattr(export_text, "MAX_UPLOAD_BYTES", 100_000)
    monkeypatch.setattr(export_text, "BLOCK_BYTES", 10_000)
    text = dcgm.openmetrics().encode()
    assert len(text) > 200_000
    with pytest.raises(export_text.ExportError, match="larger than"):
        export_text.read_export(io.BytesIO(text))


def test_a_compressed_or_binary_export_is_named_as_such():
    from telemetry.export_text import ExportError, read_export

    with pytest.raises(ExportError, match="looks like binary: a gzip archive"):
        read_export(io.BytesIO(gzip.compress(b"DCGM_FI_DEV_POWER_USAGE 1 2\n")))
    with pytest.raises(ExportError, match="not UTF-8 text"):
        read_export(io.BytesIO(b'DCGM_FI_DEV_POWER_USAGE{gpu="0"} 1 2\n' + b"\xff\xfe" * 4))

"""Number formats of the weights and the KV cache, and the path their matrix products take.

Each weight format says how many bytes a parameter takes in memory (with its scales) and how
the products are computed:

- native: activations are cast to the same format and the tensor cores run it (bf16/fp16;
  fp8 W8A8 on Hopper and later; NVFP4 and MXFP4 on Blackwell, whose tensor cores take 4-bit
  blocks with their scales). The peak is the card's peak for that format.
- weight-only (int8 W8A16, int4 W4A16, and fp8 on a card without FP8 tensor cores, as vLLM's
  Marlin kernels run it on A100): the weights are dequantised to 16 bits inside the kernel,
  so the products run at the bf16 peak and the weight stream reaches a smaller share of the
  bandwidth (engines.SHARED.dequant_bandwidth, fitted on gpt-fast's int8/int4 figures).
- A 4-bit float format (NVFP4, MXFP4) needs FP4 tensor cores: on a card without a
  ``dense_fp4_tflops`` figure the option is refused with that reason.

Bytes: NVFP4 stores 16 values of 4 bits with one FP8 scale (4.5 bits a value, NVIDIA,
"Introducing NVFP4", 2025); MXFP4 32 values with one 8-bit E8M0 scale (4.25 bits; OCP
Microscaling Formats v1.0, 2023). int4 is counted at 4 bits (group scales are under 3 %).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Path = Literal["native", "weight_only"]


@dataclass(frozen=True)
class WeightFormat:
    bytes_per_value: float
    path: Path
    peak_column: str  # the card column of its native peak ("" for 16-bit)
    dequant: str  # key of engines.SHARED.dequant_bandwidth on the weight-only path ("" none)
    needs_fp4_cores: bool = False


WEIGHT_FORMATS: dict[str, WeightFormat] = {
    "bf16": WeightFormat(2.0, "native", "", ""),
    "fp16": WeightFormat(2.0, "native", "", ""),
    "fp8": WeightFormat(1.0, "native", "dense_fp8_tflops", "int8"),
    "int8": WeightFormat(1.0, "weight_only", "", "int8"),
    "int4": WeightFormat(0.5, "weight_only", "", "int4"),
    "nvfp4": WeightFormat(4.5 / 8.0, "native", "dense_fp4_tflops", "", needs_fp4_cores=True),
    "mxfp4": WeightFormat(4.25 / 8.0, "native", "dense_fp4_tflops", "", needs_fp4_cores=True),
}
KV_BYTES: dict[str, float] = {"bf16": 2.0, "fp16": 2.0, "fp8": 1.0, "int8": 1.0}
FP4_COLUMN = "dense_fp4_tflops"

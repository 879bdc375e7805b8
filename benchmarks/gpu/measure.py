"""One-shot GPU measurements that calibrate Fleetwise's training and serving models.

Runs dense GEMMs (bf16, FP8), device memory bandwidth, Llama-style training steps, Llama-3.1-8B
decode steps (CUDA graphs) and prefills, causal attention kernels and an FP8 training step, all
under one wall-clock budget, and writes every result as it arrives to
``DIR/gpu-measurements.json``. Standard library and torch only; see README.md next to this file
for the FLOP conventions and how a run is committed.

    python3 benchmarks/gpu/measure.py --out DIR [--budget-s 480] [--quick]
    python3 benchmarks/gpu/measure.py --out DIR --device cpu --quick   # code-path smoke test
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import gc
import json
import math
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

STARTED = time.monotonic()  # the budget counts from here (before torch is imported)

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.checkpoint import checkpoint  # noqa: E402

SCHEMA = 1
RESULT_FILE = "gpu-measurements.json"
END_RESERVE_S = 5.0  # kept free at the end of the budget for the last write
BF16 = torch.bfloat16
GIB = 1024**3
OOM_ERRORS: tuple[type[BaseException], ...] = (
    getattr(torch.cuda, "OutOfMemoryError", MemoryError),
)

# Dense (no sparsity) peaks from NVIDIA's data sheets: half the "with sparsity" figures.
# (substrings of the lower-cased device name, card, bf16 TFLOP/s, fp8 TFLOP/s, HBM TB/s)
CARD_PEAKS: tuple[tuple[tuple[str, ...], str, float, float, float | None], ...] = (
    (("gh200",), "GH200", 989.4, 1978.9, None),
    (("h200 nvl",), "H200 NVL", 835.5, 1670.5, 4.8),
    (("h200",), "H200 SXM", 989.4, 1978.9, 4.8),
    (("h100 nvl",), "H100 NVL", 835.5, 1670.5, 3.9),
    (("h100 pcie",), "H100 PCIe", 756.5, 1513.0, 2.0),
    (("h100",), "H100 SXM", 989.4, 1978.9, 3.35),
)

# The most seconds each section may use out of a 480 s budget (scaled with --budget-s). The
# global deadline applies as well; a section's unused time is left to the ones after it.
SECTION_CAPS_S = {
    "gemm": 60.0,
    "memory": 15.0,
    "train": 170.0,
    "decode": 110.0,
    "attention": 40.0,
    "train_fp8": 60.0,
    "decode_small": 45.0,
}

CONVENTIONS = {
    "gemm_flops": "2*M*N*K per C[M,N] = A[M,K] @ B[K,N]; B is stored (N,K) row-major and "
    "passed transposed (the nn.Linear layout); inputs torch.randn",
    "fp8_gemm": "torch._scaled_mm, float8_e4m3fn A (row-major) and B (column-major), "
    "per-tensor float32 scales, bf16 output; quantization time not included",
    "attention_flops_fwd": "4*b*h_q*s^2*d/2 (causal: half of the s x s square; FlashAttention "
    "benchmark convention)",
    "attention_flops_fwd_bwd": "3.5 x forward (backward = 2.5 x forward: 5 matmuls vs 2; "
    "FlashAttention benchmark convention)",
    "memory_bandwidth": "copy counts read + write bytes (2 x size); read = sum reduction; "
    "write = fill_; GB = 1e9 bytes",
    "train_flops_per_token": {
        "6n_nonembedding": "6 * N_nonembedding (Kaplan et al. 2020; N excludes the embedding "
        "and, when untied, the output matrix)",
        "6n_total": "6 * N_total (every parameter, a tied embedding counted once)",
        "megatron": "6 * N_matmul + 12 * layers * seq * (q_heads * head_dim); N_matmul = block "
        "linear weights + the output projection (vocab * hidden). The attention term counts the "
        "full s x s square (Narayanan et al. 2021 / PaLM appendix B; Fleetwise's step-time "
        "model uses the same s / (6 * hidden) attention share). Headline `mfu` uses this.",
        "causal": "6 * N_matmul + 6 * layers * seq * (q_heads * head_dim): the attention term "
        "halved for the causal mask (the FLOPs the kernels actually need)",
    },
    "mfu": "flops_per_token * tokens_per_s / dense bf16 peak of the card (see `peaks`)",
    "decode_bytes_per_step": "every weight once (block weights, final norm, output matrix; "
    "the embedding rows read are negligible) + the K and V cache prefix of every sequence "
    "(2 * layers * batch * kv_heads * context * head_dim * 2 bytes)",
    "decode_flops_per_step": "2 * N_matmul * batch + 4 * layers * batch * q_heads * context * "
    "head_dim",
    "prefill_flops": "2 * N_block_linear * tokens + causal attention forward (2 * layers * b * "
    "q_heads * s^2 * head_dim) + output projection for the last token of each sequence",
    "units": "ms milliseconds, s seconds, GB 1e9 bytes, GiB 2^30 bytes, TFLOP/s 1e12 FLOP/s",
}


class Terminated(BaseException):
    """SIGTERM arrived (an outer timeout): stop measuring and write what we have."""


# --------------------------------------------------------------------------------------------
# Model shapes and FLOP/byte counts
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelCfg:
    name: str
    layers: int
    hidden: int
    ffn: int
    heads: int
    kv_heads: int
    vocab: int
    tied: bool
    rope_theta: float = 500000.0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def qkv_out(self) -> int:
        return (self.heads + 2 * self.kv_heads) * self.head_dim

    @property
    def block_linear_params(self) -> int:
        per_layer = (
            self.hidden * self.qkv_out
            + self.heads * self.head_dim * self.hidden
            + self.hidden * 2 * self.ffn
            + self.ffn * self.hidden
        )
        return self.layers * per_layer

    @property
    def norm_params(self) -> int:
        return (2 * self.layers + 1) * self.hidden

    @property
    def embedding_params(self) -> int:
        return self.vocab * self.hidden

    @property
    def nonembedding_params(self) -> int:
        return self.block_linear_params + self.norm_params

    @property
    def total_params(self) -> int:
        return self.nonembedding_params + self.embedding_params * (1 if self.tied else 2)

    @property
    def matmul_params(self) -> int:
        """Weights each token multiplies through: block linears and the output projection."""
        return self.block_linear_params + self.embedding_params

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * 2  # K and V, bf16

    def train_flops_per_token(self, seq: int) -> dict[str, float]:
        attn = self.layers * seq * self.heads * self.head_dim
        return {
            "6n_nonembedding": 6.0 * self.nonembedding_params,
            "6n_total": 6.0 * self.total_params,
            "megatron": 6.0 * self.matmul_params + 12.0 * attn,
            "causal": 6.0 * self.matmul_params + 6.0 * attn,
        }

    def describe(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "head_dim": self.head_dim,
            "params_total": self.total_params,
            "params_nonembedding": self.nonembedding_params,
            "params_matmul": self.matmul_params,
            "params_embedding": self.embedding_params,
        }


LLAMA_1B = ModelCfg("llama-3.2-1b", 16, 2048, 8192, 32, 8, 128256, tied=True)
LLAMA_3B = ModelCfg("llama-3.2-3b", 28, 3072, 8192, 24, 8, 128256, tied=True)
LLAMA_8B = ModelCfg("llama-3.1-8b", 32, 4096, 14336, 32, 8, 128256, tied=False)
TINY_TIED = ModelCfg("tiny-tied", 2, 128, 256, 4, 2, 512, tied=True)
TINY_UNTIED = ModelCfg("tiny-untied", 2, 128, 256, 4, 2, 512, tied=False)


def _card_peaks(name: str | None) -> dict[str, Any]:
    low = (name or "").lower()
    for needles, card, bf16, fp8, hbm in CARD_PEAKS:
        if any(n in low for n in needles):
            return {
                "card": card,
                "bf16_dense_tflops": bf16,
                "fp8_dense_tflops": fp8,
                "hbm_tb_s": hbm,
                "source": "NVIDIA data sheet, dense = half the with-sparsity figure",
            }
    return {"card": None, "bf16_dense_tflops": None, "fp8_dense_tflops": None, "hbm_tb_s": None}


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


def _clean(value: Any) -> Any:
    """JSON-safe copy: non-finite floats become null, tuples lists, dtypes strings."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if value is None or isinstance(value, bool | int | str):
        return value
    return str(value)


def _short(exc: BaseException, limit: int = 400) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:limit]}"


def _nvidia_smi(fields: str) -> dict[str, Any]:
    try:
        proc = subprocess.run(
            ["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=15,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return {"error": _short(exc)}
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"error": (proc.stderr.strip() or f"exit status {proc.returncode}")[:300]}
    line = proc.stdout.strip().splitlines()[0]
    values = [v.strip() for v in line.split(",")]
    return {**dict(zip(fields.split(","), values, strict=False)), "raw": line}


def _probe_sdpa_gqa() -> bool:
    q = torch.zeros(1, 4, 2, 16)
    k = torch.zeros(1, 2, 2, 16)
    try:
        F.scaled_dot_product_attention(q, k, k, is_causal=True, enable_gqa=True)
    except (TypeError, RuntimeError):
        return False
    return True


SDPA_HAS_GQA = _probe_sdpa_gqa()


def sdpa_gqa(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool) -> torch.Tensor:
    """SDPA over (b, heads, s, d) tensors; k/v may have fewer heads (grouped-query)."""
    if q.shape[1] != k.shape[1]:
        if SDPA_HAS_GQA:
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
        rep = q.shape[1] // k.shape[1]
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


def _sdpa_backends(names: list[str]) -> contextlib.AbstractContextManager[Any]:
    """Context enabling only the named SDPA backends (flash, cudnn, efficient, math)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    table = {
        "flash": "FLASH_ATTENTION",
        "cudnn": "CUDNN_ATTENTION",
        "efficient": "EFFICIENT_ATTENTION",
        "math": "MATH",
    }
    chosen = [getattr(SDPBackend, table[n]) for n in names if hasattr(SDPBackend, table[n])]
    if not chosen:
        raise RuntimeError(f"SDPA backends {names} are not in this torch")
    return sdpa_kernel(chosen)


def _rope_tables(
    head_dim: int, positions: torch.Tensor, theta: float, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    inv = 1.0 / (
        theta
        ** (torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim)
    )
    freqs = torch.outer(positions.to(torch.float32), inv)
    return freqs.cos().to(dtype), freqs.sin().to(dtype)


def _rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def _rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    if hasattr(F, "rms_norm"):
        return F.rms_norm(x, (x.shape[-1],), weight, eps)
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight


# --------------------------------------------------------------------------------------------
# FP8 (per-tensor dynamic scaling, torch._scaled_mm)
# --------------------------------------------------------------------------------------------


def _fp8_unsupported(device: torch.device) -> str | None:
    if device.type != "cuda":
        return "FP8 is measured on CUDA only"
    if not hasattr(torch, "float8_e4m3fn") or not hasattr(torch, "_scaled_mm"):
        return f"torch {torch.__version__} has no float8_e4m3fn / _scaled_mm"
    cap = torch.cuda.get_device_capability(device)
    if cap < (8, 9):
        return f"compute capability {cap[0]}.{cap[1]} < 8.9 has no FP8 tensor cores"
    try:
        a = torch.ones(16, 16, device=device).to(torch.float8_e4m3fn)
        one = torch.ones((), device=device, dtype=torch.float32)
        fp8_mm(a, a.t(), one, one)
        torch.cuda.synchronize(device)
    except Exception as exc:
        return f"torch._scaled_mm probe failed: {_short(exc)}"
    return None


def quantize_fp8(x: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-tensor dynamic scaling: (x * s⁻¹ in `dtype`, s as a 0-dim float32 dequant scale)."""
    fmax = torch.finfo(dtype).max
    amax = x.detach().abs().amax().float().clamp(min=1e-12)
    inv = (fmax / amax).to(x.dtype)  # the factor actually applied, in x's precision
    xq = (x.detach() * inv).clamp_(-fmax, fmax).to(dtype)
    return xq, inv.float().reciprocal()


def fp8_mm(
    a: torch.Tensor,
    b_t: torch.Tensor,
    scale_a: torch.Tensor,
    scale_b: torch.Tensor,
    out_dtype: torch.dtype = BF16,
    fast_accum: bool = False,
) -> torch.Tensor:
    """(a * scale_a) @ (b_t * scale_b): a (M, K) row-major, b_t (K, N) column-major, K, N % 16."""
    if a.stride(1) != 1 or a.stride(0) < a.shape[1]:
        raise ValueError(f"fp8_mm: first operand must be row-major, stride {a.stride()}")
    if b_t.stride(0) != 1 or b_t.stride(1) < b_t.shape[0]:
        raise ValueError(f"fp8_mm: second operand must be column-major, stride {b_t.stride()}")
    if a.shape[1] % 16 or b_t.shape[0] % 16 or b_t.shape[1] % 16:
        raise ValueError(f"fp8_mm: dims must be multiples of 16, got {a.shape} @ {b_t.shape}")
    out = torch._scaled_mm(
        a,
        b_t,
        scale_a=scale_a,
        scale_b=scale_b,
        out_dtype=out_dtype,
        use_fast_accum=fast_accum,
    )
    return out[0] if isinstance(out, tuple) else out  # torch < 2.5 returned (out, amax)


class _FP8LinearFn(torch.autograd.Function):
    """y = x Wᵀ with x and W cast to float8_e4m3fn (per-tensor scales) for the forward GEMM.

    fp8_backward=False: the two backward GEMMs (dgrad, wgrad) run in bf16 from saved bf16 x.
    fp8_backward=True: they run in FP8 too, the output gradient cast to float8_e5m2 ("hybrid"
    recipe), reusing the saved FP8 x and W (transposed copies made for the layouts).
    """

    @staticmethod
    def forward(ctx, x, weight, fp8_backward):  # type: ignore[override]
        with torch.autocast(x.device.type, enabled=False):
            shape = x.shape
            x2 = x.reshape(-1, shape[-1]).to(BF16).contiguous()
            xq, xs = quantize_fp8(x2, torch.float8_e4m3fn)
            wq, ws = quantize_fp8(weight, torch.float8_e4m3fn)
            out = fp8_mm(xq, wq.t(), xs, ws)
            if fp8_backward:
                ctx.save_for_backward(xq, xs, wq, ws)
            else:
                ctx.save_for_backward(x2, weight)
        ctx.fp8_backward = fp8_backward
        ctx.x_shape = shape
        ctx.w_dtype = weight.dtype
        return out.reshape(*shape[:-1], weight.shape[0])

    @staticmethod
    def backward(ctx, grad):  # type: ignore[override]
        with torch.autocast(grad.device.type, enabled=False):
            g = grad.reshape(-1, grad.shape[-1]).to(BF16).contiguous()
            if ctx.fp8_backward:
                xq, xs, wq, ws = ctx.saved_tensors
                gq, gs = quantize_fp8(g, torch.float8_e5m2)
                # dgrad (T,N)@(N,K): W (N,K) must be column-major -> transpose copy of W.
                gx = fp8_mm(gq, wq.t().contiguous().t(), gs, ws)
                # wgrad (N,T)@(T,K): gᵀ row-major, x column-major -> transpose copies.
                gw = fp8_mm(gq.t().contiguous(), xq.t().contiguous().t(), gs, xs)
            else:
                x2, weight = ctx.saved_tensors
                gx = g @ weight.to(BF16)
                gw = g.t() @ x2
        return gx.reshape(ctx.x_shape), gw.to(ctx.w_dtype), None


class FP8Linear(nn.Linear):
    def __init__(self, in_features: int, out_features: int, fp8_backward: bool) -> None:
        super().__init__(in_features, out_features, bias=False)
        self.fp8_backward = fp8_backward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _FP8LinearFn.apply(x, self.weight, self.fp8_backward)


# --------------------------------------------------------------------------------------------
# Training model (Llama-style decoder)
# --------------------------------------------------------------------------------------------


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float = 1e-5) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(x.device.type, enabled=False):  # bf16 in, bf16 out, fp32 inside
            return _rms_norm(x, self.weight.to(x.dtype), self.eps)


class Block(nn.Module):
    def __init__(self, cfg: ModelCfg, linear: Callable[[int, int], nn.Module]) -> None:
        super().__init__()
        self.cfg = cfg
        self.attn_norm = RMSNorm(cfg.hidden)
        self.wqkv = linear(cfg.hidden, cfg.qkv_out)
        self.wo = linear(cfg.heads * cfg.head_dim, cfg.hidden)
        self.mlp_norm = RMSNorm(cfg.hidden)
        self.w13 = linear(cfg.hidden, 2 * cfg.ffn)  # gate and up, fused
        self.w2 = linear(cfg.ffn, cfg.hidden)

    def forward(self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        b, s, _ = x.shape
        qkv = self.wqkv(self.attn_norm(x)).view(b, s, c.heads + 2 * c.kv_heads, c.head_dim)
        q, k, v = qkv.split([c.heads, c.kv_heads, c.kv_heads], dim=2)
        q = _rope(q, cos, sin).transpose(1, 2)
        k = _rope(k, cos, sin).transpose(1, 2)
        o = sdpa_gqa(q, k, v.transpose(1, 2), causal=True)
        x = x + self.wo(o.transpose(1, 2).reshape(b, s, c.heads * c.head_dim))
        gate, up = self.w13(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.w2(F.silu(gate) * up)


class LlamaTrain(nn.Module):
    """Decoder with fp32 parameters; run under bf16 autocast with a bf16 residual stream."""

    def __init__(self, cfg: ModelCfg, ckpt: bool = False, fp8: str | None = None) -> None:
        super().__init__()
        self.cfg = cfg
        self.ckpt = ckpt
        if fp8 is None:

            def linear(i: int, o: int) -> nn.Module:
                return nn.Linear(i, o, bias=False)
        else:
            fp8_backward = fp8 == "fp8_all"

            def linear(i: int, o: int) -> nn.Module:
                return FP8Linear(i, o, fp8_backward)

        self.embed = nn.Embedding(cfg.vocab, cfg.hidden)
        nn.init.normal_(self.embed.weight, std=0.02)
        self.blocks = nn.ModuleList(Block(cfg, linear) for _ in range(cfg.layers))
        self.norm = RMSNorm(cfg.hidden)
        self.lm_head = None if cfg.tied else nn.Linear(cfg.hidden, cfg.vocab, bias=False)

    def forward(self, ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        cfg = self.cfg
        pos = torch.arange(ids.shape[1], device=ids.device)
        cos, sin = _rope_tables(cfg.head_dim, pos, cfg.rope_theta, BF16)
        cos, sin = cos[:, None, :], sin[:, None, :]  # (s, 1, d/2) against (b, s, heads, d/2)
        x = self.embed(ids).to(BF16)
        for blk in self.blocks:
            x = checkpoint(blk, x, cos, sin, use_reentrant=False) if self.ckpt else blk(x, cos, sin)
        x = self.norm(x)
        out_w = self.embed.weight if self.lm_head is None else self.lm_head.weight
        logits = F.linear(x, out_w)
        return F.cross_entropy(logits.reshape(-1, cfg.vocab).float(), labels.reshape(-1))


def train_memory_estimate(cfg: ModelCfg, seq: int, micro_batch: int, ckpt: bool) -> int:
    """Rough peak bytes of one training step: fp32 weights, grads, Adam m and v, the bf16
    autocast copies, saved activations (bf16) and the logits / cross-entropy buffers."""
    static = 18 * cfg.total_params
    tokens = micro_batch * seq
    per_layer_token = 16 * cfg.hidden + 8 * cfg.kv_heads * cfg.head_dim + 8 * cfg.ffn
    if ckpt:
        act = (cfg.layers * 2 * cfg.hidden + per_layer_token) * tokens
    else:
        act = cfg.layers * per_layer_token * tokens
    logits = 12 * cfg.vocab * tokens  # bf16 logits, fp32 log-softmax, fp32 + bf16 gradients
    return int(static + 1.15 * act + logits + GIB)


# --------------------------------------------------------------------------------------------
# Serving model (random bf16 weights, static KV cache)
# --------------------------------------------------------------------------------------------


class DecodeModel:
    def __init__(self, cfg: ModelCfg, device: torch.device) -> None:
        self.cfg = cfg
        self.device = device

        def w(*shape: int) -> torch.Tensor:
            return torch.empty(shape, device=device, dtype=BF16).normal_(0.0, 0.02)

        def ones(n: int) -> torch.Tensor:
            return torch.ones(n, device=device, dtype=BF16)

        c = cfg
        self.embed = w(c.vocab, c.hidden)
        self.layers = [
            {
                "attn_norm": ones(c.hidden),
                "wqkv": w(c.qkv_out, c.hidden),
                "wo": w(c.hidden, c.heads * c.head_dim),
                "mlp_norm": ones(c.hidden),
                "w13": w(2 * c.ffn, c.hidden),
                "w2": w(c.hidden, c.ffn),
            }
            for _ in range(c.layers)
        ]
        self.norm = ones(c.hidden)
        self.lm_head = self.embed if c.tied else w(c.vocab, c.hidden)

    def weight_bytes_per_step(self) -> int:
        block = sum(t.numel() for layer in self.layers for t in layer.values())
        return 2 * (block + self.norm.numel() + self.lm_head.numel())

    def new_cache(self, batch: int, context: int) -> tuple[torch.Tensor, torch.Tensor]:
        c = self.cfg
        shape = (c.layers, batch, c.kv_heads, context, c.head_dim)
        k = torch.empty(shape, device=self.device, dtype=BF16)
        v = torch.empty(shape, device=self.device, dtype=BF16)
        return k, v

    def _mlp(self, layer: dict[str, torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        h = _rms_norm(x, layer["mlp_norm"], 1e-5)
        gate, up = F.linear(h, layer["w13"]).chunk(2, dim=-1)
        return x + F.linear(F.silu(gate) * up, layer["w2"])

    def decode_step(
        self,
        tokens: torch.Tensor,
        cache: tuple[torch.Tensor, torch.Tensor],
        rope: tuple[torch.Tensor, torch.Tensor],
        context: int,
    ) -> torch.Tensor:
        """Greedy next token of every sequence (see decode_logits)."""
        return self.decode_logits(tokens, cache, rope, context).argmax(dim=-1)

    def decode_logits(
        self,
        tokens: torch.Tensor,
        cache: tuple[torch.Tensor, torch.Tensor],
        rope: tuple[torch.Tensor, torch.Tensor],
        context: int,
    ) -> torch.Tensor:
        """One new token per sequence at position context - 1; attends to the whole prefix.

        Grouped-query attention as plain SDPA: the g = heads / kv_heads query heads of a group
        become g query rows against that group's cache (no mask is needed for one token)."""
        c = self.cfg
        b = tokens.shape[0]
        g = c.heads // c.kv_heads
        k_cache, v_cache = cache
        cos, sin = rope
        pos = context - 1
        x = F.embedding(tokens, self.embed)
        for i, layer in enumerate(self.layers):
            h = _rms_norm(x, layer["attn_norm"], 1e-5)
            qkv = F.linear(h, layer["wqkv"]).view(b, c.heads + 2 * c.kv_heads, c.head_dim)
            q, k, v = qkv.split([c.heads, c.kv_heads, c.kv_heads], dim=1)
            k_cache[i, :b, :, pos] = _rope(k, cos, sin)
            v_cache[i, :b, :, pos] = v
            q = _rope(q, cos, sin).reshape(b, c.kv_heads, g, c.head_dim)
            o = F.scaled_dot_product_attention(
                q, k_cache[i, :b, :, :context], v_cache[i, :b, :, :context]
            )
            x = x + F.linear(o.reshape(b, c.heads * c.head_dim), layer["wo"])
            x = self._mlp(layer, x)
        x = _rms_norm(x, self.norm, 1e-5)
        return F.linear(x, self.lm_head)

    def prefill(
        self, tokens: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor]
    ) -> torch.Tensor:
        """Greedy next token of every prompt (see prefill_logits)."""
        return self.prefill_logits(tokens, cache).argmax(dim=-1)

    def prefill_logits(
        self, tokens: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor]
    ) -> torch.Tensor:
        """Causal forward over whole prompts, K/V written to the cache, logits for the last
        position of each sequence only."""
        c = self.cfg
        b, s = tokens.shape
        k_cache, v_cache = cache
        cos, sin = _rope_tables(
            c.head_dim, torch.arange(s, device=tokens.device), c.rope_theta, BF16
        )
        cos, sin = cos[:, None, :], sin[:, None, :]
        x = F.embedding(tokens, self.embed)
        for i, layer in enumerate(self.layers):
            h = _rms_norm(x, layer["attn_norm"], 1e-5)
            qkv = F.linear(h, layer["wqkv"]).view(b, s, c.heads + 2 * c.kv_heads, c.head_dim)
            q, k, v = qkv.split([c.heads, c.kv_heads, c.kv_heads], dim=2)
            q = _rope(q, cos, sin).transpose(1, 2)
            k = _rope(k, cos, sin).transpose(1, 2)
            v = v.transpose(1, 2)
            k_cache[i, :b, :, :s].copy_(k)
            v_cache[i, :b, :, :s].copy_(v)
            o = sdpa_gqa(q, k, v, causal=True)
            x = x + F.linear(o.transpose(1, 2).reshape(b, s, c.heads * c.head_dim), layer["wo"])
            x = self._mlp(layer, x)
        x = _rms_norm(x[:, -1], self.norm, 1e-5)
        return F.linear(x, self.lm_head)


# --------------------------------------------------------------------------------------------
# The run: budget, timing, recording
# --------------------------------------------------------------------------------------------


class Run:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.device = torch.device(args.device)
        self.cuda = self.device.type == "cuda"
        self.tiny = not self.cuda  # CPU: tiny shapes, a code-path smoke test only
        self.quick = bool(args.quick) or self.tiny
        self.deadline = STARTED + float(args.budget_s) - END_RESERVE_S
        self.section_deadline = self.deadline
        self.path = Path(args.out) / RESULT_FILE
        self.peaks: dict[str, Any] = _card_peaks(None)
        self.data: dict[str, Any] = {
            "schema": SCHEMA,
            "tool": "benchmarks/gpu/measure.py",
            "status": "running",
            "started_utc": _utc_now(),
            "args": {
                "budget_s": args.budget_s,
                "quick": self.quick,
                "device": args.device,
                "tiny_shapes": self.tiny,
                "only": args.only,
            },
            "conventions": CONVENTIONS,
            "env": {},
            "peaks": self.peaks,
            "sections": {},
            "gemm": [],
            "memory": [],
            "train": [],
            "decode": [],
            "prefill": [],
            "attention": [],
            "train_fp8": [],
        }

    # time ------------------------------------------------------------------------------------
    def elapsed(self) -> float:
        return time.monotonic() - STARTED

    def left(self) -> float:
        return min(self.deadline, self.section_deadline) - time.monotonic()

    def sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize(self.device)

    def free(self) -> None:
        """Drop unreferenced tensors and return cached blocks; never raises (a sticky CUDA
        error is recorded once and shows up again in the next measurement's own error)."""
        gc.collect()
        if not self.cuda:
            return
        try:
            torch.cuda.synchronize(self.device)
            torch.cuda.empty_cache()
        except Exception as exc:
            self.data.setdefault("cuda_errors", []).append(
                {"elapsed_s": round(self.elapsed(), 1), "error": _short(exc)}
            )

    def free_bytes(self) -> int:
        if not self.cuda:
            return 1 << 62
        return int(torch.cuda.mem_get_info(self.device)[0])

    def time_block(self, fn: Callable[[], Any], iters: int) -> float:
        """Milliseconds per call of `iters` back-to-back calls."""
        if self.cuda:
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(iters):
                fn()
            end.record()
            end.synchronize()
            return start.elapsed_time(end) / iters
        t = time.perf_counter()
        for _ in range(iters):
            fn()
        return (time.perf_counter() - t) * 1e3 / iters

    def bench(
        self,
        fn: Callable[[], Any],
        *,
        warmup: int = 2,
        reps: int = 5,
        min_rep_ms: float = 25.0,
        max_s: float = 3.0,
    ) -> dict[str, Any]:
        """Median over `reps` timed blocks; each block repeats fn until it lasts ~min_rep_ms."""
        for _ in range(warmup):
            fn()
        self.sync()
        first = max(self.time_block(fn, 1), 1e-4)
        inner = max(1, min(10000, math.ceil(min_rep_ms / first)))
        reps = max(3, min(reps, int(max_s * 1e3 / (first * inner))))
        if self.quick:
            reps = 3
        times = [self.time_block(fn, inner) for _ in range(reps)]
        return {
            "time_ms": statistics.median(times),
            "time_ms_min": min(times),
            "time_ms_max": max(times),
            "reps": reps,
            "calls_per_rep": inner,
        }

    # recording -------------------------------------------------------------------------------
    def save(self) -> None:
        self.data["elapsed_s"] = round(self.elapsed(), 2)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(_clean(self.data), indent=1, allow_nan=False) + "\n")
        os.replace(tmp, self.path)

    def log(self, text: str) -> None:
        print(f"[{self.elapsed():6.1f}s] {text}", flush=True)

    def measure(
        self,
        key: str,
        label: str,
        inputs: dict[str, Any],
        est_s: float,
        fn: Callable[[], dict[str, Any]],
        summary: Callable[[dict[str, Any]], str],
    ) -> dict[str, Any]:
        """Run one measurement, never raising (except Terminated); append its row and save."""
        row: dict[str, Any] = dict(inputs)
        if est_s > self.left():
            row.update(status="skipped", reason=f"budget: needs ~{est_s:.0f} s")
        else:
            t = time.monotonic()
            failure: dict[str, Any] | None = None
            try:
                out = fn()
            except OOM_ERRORS as exc:
                failure = {"status": "oom", "reason": _short(exc)}
            except Terminated:
                raise
            except Exception as exc:
                failure = {
                    "status": "error",
                    "reason": _short(exc),
                    "traceback_tail": traceback.format_exc()[-1500:],
                }
            if failure is not None:
                # The exception (and the tensors its frames held) is gone here: free them. A
                # success frees its tensors by reference counting (gc.collect costs ~0.1 s).
                self.free()
            row.update(failure if failure is not None else out)
            row.setdefault("status", "ok")
            row["wall_s"] = round(time.monotonic() - t, 3)
        self.data[key].append(row)
        self.save()
        if row["status"] == "ok":
            try:
                text = summary(row)
            except (KeyError, TypeError, ValueError):
                text = "ok"
        else:
            text = f"{row['status']}: {row.get('reason', '')}"[:300]
        self.log(f"{key} {label}: {text}")
        return row

    def skip_rows(self, key: str, rows: list[dict[str, Any]], reason: str, label: str) -> None:
        for inputs in rows:
            self.data[key].append({**inputs, "status": "skipped", "reason": reason})
        self.save()
        self.log(f"{key} {label}: skipped {len(rows)}: {reason}")

    def gpu_state(self) -> dict[str, Any]:
        if not self.cuda:
            return {}
        state = _nvidia_smi("clocks.sm,clocks.mem,temperature.gpu,power.draw")
        with contextlib.suppress(Exception):
            state["memory_allocated_gib"] = torch.cuda.memory_allocated(self.device) / GIB
        return state

    # derived figures -------------------------------------------------------------------------
    def tflops(self, flops: float, time_ms: float) -> float:
        return flops / (time_ms * 1e-3) / 1e12

    def frac_of_peak(self, tflops: float, key: str = "bf16_dense_tflops") -> float | None:
        peak = self.peaks.get(key)
        return tflops / peak if peak else None


def _utc_now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------


def section_env(run: Run) -> None:
    env: dict[str, Any] = {
        "timestamp_utc": _utc_now(),
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "torch": torch.__version__,
        "cuda_runtime": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "triton": _module_version("triton"),
        "device": run.args.device,
        "cpu_count": os.cpu_count(),
        "sdpa_enable_gqa": SDPA_HAS_GQA,
        "pytorch_cuda_alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    if run.cuda:
        props = torch.cuda.get_device_properties(run.device)
        cap = torch.cuda.get_device_capability(run.device)
        env.update(
            gpu_name=torch.cuda.get_device_name(run.device),
            gpu_count=torch.cuda.device_count(),
            sm_count=props.multi_processor_count,
            compute_capability=f"{cap[0]}.{cap[1]}",
            total_memory_bytes=props.total_memory,
            total_memory_gib=round(props.total_memory / GIB, 2),
            l2_cache_bytes=getattr(props, "L2_cache_size", None),
            free_memory_bytes_at_start=run.free_bytes(),
            nvidia_smi=_nvidia_smi("driver_version,name,memory.total,clocks.max.sm"),
            nvidia_smi_extra=_nvidia_smi("power.limit,clocks.max.memory,pstate"),
            matmul_bf16_reduced_precision_reduction=(
                torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction
            ),
            sdpa_backends_enabled={
                name: bool(getattr(torch.backends.cuda, f"{name}_sdp_enabled", lambda: None)())
                for name in ("flash", "mem_efficient", "cudnn", "math")
            },
        )
        env["driver_version"] = env["nvidia_smi"].get("driver_version")
        run.peaks.update(_card_peaks(env["gpu_name"]))
        slug = re.sub(r"[^a-z0-9]+", "-", env["gpu_name"].lower().replace("nvidia", "")).strip("-")
        env["suggested_result_name"] = f"{slug}-{env['timestamp_utc'][:10]}.json"
    run.data["env"] = env
    run.save()
    run.log(
        f"env: {env.get('gpu_name', 'cpu')} torch {env['torch']} cuda {env['cuda_runtime']} "
        f"peaks {run.peaks.get('card')} bf16 {run.peaks.get('bf16_dense_tflops')} TFLOP/s"
    )


def _module_version(name: str) -> str | None:
    try:
        module = __import__(name)
    except ImportError:
        return None
    return getattr(module, "__version__", None)


def _gemm_shapes(run: Run) -> list[tuple[str, str, int, int, int]]:
    """(model, kind, M, N, K); C[M,N] = A[M,K] @ W[N,K]ᵀ."""
    if run.tiny:
        return [("-", "square", 64, 64, 64), ("tiny", "ffn_up", 64, 256, 128)]
    if run.quick:
        return [("-", "square", 4096, 4096, 4096), ("llama-3.1-8b", "ffn_up", 8192, 14336, 4096)]
    shapes = [("-", "square", n, n, n) for n in (1024, 2048, 4096, 8192, 16384)]
    models = (
        ("llama-3.2-1b", 2048, 8192),
        ("llama-3.2-3b", 3072, 8192),
        ("llama-3.1-8b", 4096, 14336),
        ("llama-3.1-70b", 8192, 28672),
    )
    for m in (2048, 8192, 16384):
        for name, h, f in models:
            shapes += [
                (name, "hidden_x_hidden", m, h, h),
                (name, "ffn_up", m, f, h),
                (name, "ffn_down", m, h, f),
            ]
    return shapes


def section_gemm(run: Run) -> None:
    dev = run.device
    fp8_reason = _fp8_unsupported(dev)
    variants = [("bf16", None)]
    if fp8_reason is None:
        variants += [("fp8_e4m3", False), ("fp8_e4m3_fast_accum", True)]
    else:
        run.skip_rows(
            "gemm",
            [{"dtype": "fp8_e4m3"}, {"dtype": "fp8_e4m3_fast_accum"}],
            fp8_reason,
            "fp8",
        )

    def bf16_case(m: int, n: int, k: int) -> dict[str, Any]:
        a = torch.randn(m, k, device=dev, dtype=BF16)
        w = torch.randn(n, k, device=dev, dtype=BF16)
        c = torch.empty(m, n, device=dev, dtype=BF16)
        stats = run.bench(lambda: torch.mm(a, w.t(), out=c))
        return _gemm_out(run, stats, m, n, k, "bf16_dense_tflops")

    def fp8_case(m: int, n: int, k: int, fast: bool) -> dict[str, Any]:
        aq = torch.randn(m, k, device=dev, dtype=BF16).to(torch.float8_e4m3fn)
        wq = torch.randn(n, k, device=dev, dtype=BF16).to(torch.float8_e4m3fn)
        one = torch.ones((), device=dev, dtype=torch.float32)
        stats = run.bench(lambda: fp8_mm(aq, wq.t(), one, one, fast_accum=fast))
        return _gemm_out(run, stats, m, n, k, "fp8_dense_tflops")

    for model, kind, m, n, k in _gemm_shapes(run):
        for dtype, fast in variants:
            inputs = {"dtype": dtype, "model": model, "kind": kind, "m": m, "n": n, "k": k}
            if fast is None:
                fn = functools.partial(bf16_case, m, n, k)
            else:
                fn = functools.partial(fp8_case, m, n, k, fast)
            run.measure(
                "gemm",
                f"{dtype} M={m} N={n} K={k}",
                inputs,
                1.0,
                fn,
                lambda r: f"{r['tflops']:.1f} TFLOP/s ({r['time_ms']:.3f} ms)",
            )


def _gemm_out(
    run: Run, stats: dict[str, Any], m: int, n: int, k: int, peak_key: str
) -> dict[str, Any]:
    flops = 2.0 * m * n * k
    tflops = run.tflops(flops, stats["time_ms"])
    return {
        **stats,
        "flops": flops,
        "tflops": tflops,
        "tflops_best": run.tflops(flops, stats["time_ms_min"]),
        "fraction_of_peak": run.frac_of_peak(tflops, peak_key),
        "peak_used": peak_key,
    }


def section_memory(run: Run) -> None:
    dev = run.device
    if run.tiny:
        sizes = [16 * 1024**2]
    elif run.quick:
        sizes = [GIB]
    else:
        sizes = [256 * 1024**2, GIB, 4 * GIB]

    def case(size: int, op: str) -> dict[str, Any]:
        n = size // 4
        src = torch.randn(n, device=dev, dtype=torch.float32)
        if op == "copy":
            dst = torch.empty_like(src)
            stats = run.bench(lambda: dst.copy_(src))
            moved = 2 * size
        elif op == "read":
            stats = run.bench(lambda: src.sum())
            moved = size
        else:
            stats = run.bench(lambda: src.fill_(1.0))
            moved = size
        gb_s = moved / (stats["time_ms"] * 1e-3) / 1e9
        hbm = run.peaks.get("hbm_tb_s")
        return {
            **stats,
            "bytes_moved": moved,
            "gb_s": gb_s,
            "gb_s_best": moved / (stats["time_ms_min"] * 1e-3) / 1e9,
            "fraction_of_spec_hbm": gb_s / (hbm * 1e3) if hbm else None,
        }

    for size in sizes:
        for op in ("copy", "read", "write"):
            run.measure(
                "memory",
                f"{op} {size / GIB:.3g} GiB",
                {"op": op, "size_bytes": size, "dtype": "float32"},
                1.5,
                lambda size=size, op=op: case(size, op),
                lambda r: f"{r['gb_s']:.0f} GB/s",
            )


# training --------------------------------------------------------------------------------------


def _train_cases(run: Run) -> tuple[list[tuple[ModelCfg, int]], int]:
    if run.tiny:
        return [(TINY_TIED, 64), (TINY_TIED, 128)], 256
    if run.quick:
        return [(LLAMA_1B, 2048)], 16384
    return [(LLAMA_1B, 2048), (LLAMA_3B, 2048), (LLAMA_1B, 8192), (LLAMA_3B, 8192)], 16384


def _train_plans(run: Run, cfg: ModelCfg, seq: int, tokens: int) -> list[dict[str, Any]]:
    """Candidate (micro-batch, accumulation, checkpointing) splits of the step, largest first,
    starting at the first one the memory estimate fits; the rest are fall-backs after an OOM."""
    full = max(1, tokens // seq)
    micro = []
    mb = full
    while mb >= 1:
        micro.append(mb)
        mb //= 2
    plans = [
        {"micro_batch": mb, "grad_accum_steps": full // mb, "activation_checkpointing": ck}
        for ck in (False, True)
        for mb in micro
    ]
    avail = int(run.free_bytes() * 0.95)
    need = [
        train_memory_estimate(cfg, seq, p["micro_batch"], p["activation_checkpointing"])
        for p in plans
    ]
    for plan, n in zip(plans, need, strict=True):
        plan["estimated_peak_gib"] = round(n / GIB, 2)
        plan["available_gib"] = round(avail / GIB, 2)
    fitting = [i for i, n in enumerate(need) if n <= avail]
    start = fitting[0] if fitting else len(plans) - 1
    chosen = [start]
    for i in range(start + 1, len(plans)):  # fall-backs: each needs less memory than the last
        if len(chosen) < 3 and need[i] < need[chosen[-1]]:
            chosen.append(i)
    return [plans[i] for i in chosen]


def _train_once(
    run: Run, cfg: ModelCfg, seq: int, plan: dict[str, Any], fp8: str | None
) -> dict[str, Any]:
    dev = run.device
    mb, accum, ckpt = (
        plan["micro_batch"],
        plan["grad_accum_steps"],
        plan["activation_checkpointing"],
    )
    torch.manual_seed(0)
    with torch.device(dev):
        model = LlamaTrain(cfg, ckpt=ckpt, fp8=fp8)
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.1, fused=run.cuda)
    ids = torch.randint(0, cfg.vocab, (accum, mb, seq + 1), device=dev)

    def step() -> torch.Tensor:
        opt.zero_grad(set_to_none=True)
        loss = torch.zeros((), device=dev)
        for i in range(accum):
            with torch.autocast(dev.type, dtype=BF16):
                loss = model(ids[i, :, :-1], ids[i, :, 1:])
            (loss / accum).backward()
        opt.step()
        return loss.detach()

    if run.cuda:
        torch.cuda.reset_peak_memory_stats(dev)
    warmup, steps = (1, 2) if run.quick else (2, 5)
    for _ in range(warmup):
        step()
    run.sync()
    times: list[float] = []
    loss = torch.zeros(())
    while len(times) < steps:
        t = time.perf_counter()
        loss = step()
        run.sync()
        times.append(time.perf_counter() - t)
        if len(times) >= 2 and time.monotonic() + times[-1] > run.deadline:
            break  # out of budget: keep what was measured
    step_s = statistics.median(times)
    tokens_per_step = mb * accum * seq
    tokens_per_s = tokens_per_step / step_s
    flops = cfg.train_flops_per_token(seq)
    peak = run.peaks.get("bf16_dense_tflops")
    out: dict[str, Any] = {
        "params_counted": params,
        "micro_batch": mb,
        "grad_accum_steps": accum,
        "activation_checkpointing": ckpt,
        "estimated_peak_gib": plan["estimated_peak_gib"],
        "available_gib_at_plan": plan["available_gib"],
        "tokens_per_step": tokens_per_step,
        "warmup_steps": warmup,
        "steps_measured": len(times),
        "step_time_ms": step_s * 1e3,
        "step_time_ms_min": min(times) * 1e3,
        "step_time_ms_max": max(times) * 1e3,
        "tokens_per_s": tokens_per_s,
        "loss_last": float(loss.float().item()),
        "flops_per_token": flops,
        "achieved_tflops": {k: v * tokens_per_s / 1e12 for k, v in flops.items()},
        "mfu_by_convention": {
            k: (v * tokens_per_s / 1e12 / peak if peak else None) for k, v in flops.items()
        },
        "mfu": flops["megatron"] * tokens_per_s / 1e12 / peak if peak else None,
        "peak_tflops_used": peak,
    }
    if run.cuda:
        out["peak_memory_allocated_gib"] = torch.cuda.max_memory_allocated(dev) / GIB
        out["peak_memory_reserved_gib"] = torch.cuda.max_memory_reserved(dev) / GIB
    return out


def _train_measure(
    run: Run, cfg: ModelCfg, seq: int, tokens: int, fp8: str | None
) -> dict[str, Any]:
    attempts: list[dict[str, Any]] = []
    for plan in _train_plans(run, cfg, seq, tokens):
        failure = None
        try:
            out = _train_once(run, cfg, seq, plan, fp8)
        except OOM_ERRORS as exc:
            failure = _short(exc, 200)
        run.free()
        if failure is None:
            return {**out, "oom_attempts": attempts}
        attempts.append({**plan, "result": f"oom: {failure}"})
        if run.left() < 20:
            break
    return {"status": "oom", "reason": "no micro-batch split fitted", "oom_attempts": attempts}


def _train_est_s(run: Run, cfg: ModelCfg, seq: int, tokens: int) -> float:
    if run.tiny:
        return 2.0
    peak = run.peaks.get("bf16_dense_tflops") or 400.0
    step_s = cfg.train_flops_per_token(seq)["megatron"] * tokens / (0.3 * peak * 1e12)
    return 6.0 + (3 if run.quick else 7) * step_s


def _train_inputs(cfg: ModelCfg, seq: int, tokens: int, variant: str) -> dict[str, Any]:
    return {
        "model": cfg.name,
        "shape": cfg.describe(),
        "seq_len": seq,
        "tokens_per_step_target": tokens,
        "variant": variant,
        "precision": "bf16 autocast, fp32 master params",
        "optimizer": "torch.optim.AdamW(fused=True) on CUDA (foreach on CPU)",
        "attention": "F.scaled_dot_product_attention causal"
        + (", enable_gqa=True" if SDPA_HAS_GQA else ", kv heads repeated"),
        "torch_compile": False,
    }


def _train_summary(r: dict[str, Any]) -> str:
    mfu = r.get("mfu")
    peak = r.get("peak_memory_allocated_gib")
    return (
        f"{r['tokens_per_s']:.0f} tok/s, step {r['step_time_ms']:.0f} ms"
        + (f", MFU {mfu * 100:.1f}%" if mfu is not None else "")
        + f", mb {r['micro_batch']}x{r['grad_accum_steps']} ckpt {r['activation_checkpointing']}"
        + (f", peak {peak:.1f} GiB" if peak is not None else "")
    )


def section_train(run: Run) -> None:
    cases, tokens = _train_cases(run)
    for cfg, seq in cases:
        run.measure(
            "train",
            f"{cfg.name} seq {seq}",
            _train_inputs(cfg, seq, tokens, "bf16"),
            _train_est_s(run, cfg, seq, tokens),
            lambda cfg=cfg, seq=seq: _train_measure(run, cfg, seq, tokens, None),
            _train_summary,
        )


FP8_VARIANTS = {
    "fp8_all": "forward GEMM e4m3 x e4m3; dgrad and wgrad GEMMs e5m2 (grad) x e4m3",
    "fp8_fwd": "forward GEMM e4m3 x e4m3; dgrad and wgrad GEMMs bf16",
}


def section_train_fp8(run: Run) -> None:
    cfg, seq, tokens = (TINY_TIED, 64, 256) if run.tiny else (LLAMA_1B, 2048, 16384)
    variants = ["fp8_all"] if run.quick else list(FP8_VARIANTS)
    reason = _fp8_unsupported(run.device)
    for variant in variants:
        inputs = {
            **_train_inputs(cfg, seq, tokens, variant),
            "fp8_gemms": "the 4 block linears (wqkv, wo, w13, w2) of every layer: "
            + FP8_VARIANTS[variant]
            + "; per-tensor dynamic scales (amax each call), torch._scaled_mm, bf16 output",
            "bf16_parts": "embedding, output projection, attention core, norms, loss, optimizer",
        }
        if reason is not None:
            run.skip_rows("train_fp8", [inputs], reason, variant)
            continue
        run.measure(
            "train_fp8",
            f"{cfg.name} seq {seq} {variant}",
            inputs,
            _train_est_s(run, cfg, seq, tokens) * 1.3,
            lambda variant=variant: _train_measure(run, cfg, seq, tokens, variant),
            _train_summary,
        )


# serving ---------------------------------------------------------------------------------------


def _capture_graph(
    fn: Callable[[], torch.Tensor], backends: list[str] | None
) -> tuple[torch.cuda.CUDAGraph, torch.Tensor]:
    ctx = _sdpa_backends(backends) if backends else contextlib.nullcontext()
    with ctx:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = fn()
    torch.cuda.synchronize()
    return graph, out


def _decode_case(
    run: Run,
    model: DecodeModel,
    cache: tuple[torch.Tensor, torch.Tensor],
    batch: int,
    context: int,
) -> dict[str, Any]:
    cfg = model.cfg
    tokens = torch.randint(0, cfg.vocab, (batch,), device=run.device)
    pos = torch.tensor([context - 1], device=run.device)
    cos, sin = _rope_tables(cfg.head_dim, pos, cfg.rope_theta, BF16)
    rope = (cos[0], sin[0])

    def step() -> torch.Tensor:
        return model.decode_step(tokens, cache, rope, context)

    graph_info: dict[str, Any] = {"cuda_graph": False, "sdpa_backends": "default"}
    with torch.no_grad():
        fn: Callable[[], Any] = step
        if run.cuda:
            errors = []
            for backends in (None, ["flash", "efficient"]):
                t = time.perf_counter()
                try:
                    graph, _out = _capture_graph(step, backends)
                except Exception as exc:
                    errors.append(f"{backends or 'default'}: {_short(exc, 200)}")
                    with contextlib.suppress(Exception):
                        torch.cuda.synchronize()
                    continue
                fn = graph.replay
                graph_info = {
                    "cuda_graph": True,
                    "sdpa_backends": "+".join(backends) if backends else "default",
                    "graph_capture_ms": (time.perf_counter() - t) * 1e3,
                }
                break
            if errors:
                graph_info["graph_capture_errors"] = errors
        stats = run.bench(fn, warmup=3, reps=5, min_rep_ms=40.0, max_s=3.0)
    step_s = stats["time_ms"] * 1e-3
    weight_bytes = model.weight_bytes_per_step()
    kv_bytes = cfg.kv_bytes_per_token * batch * context
    moved = weight_bytes + kv_bytes
    gb_s = moved / step_s / 1e9
    hbm = run.peaks.get("hbm_tb_s")
    flops = 2.0 * cfg.matmul_params * batch + 4.0 * cfg.layers * batch * cfg.heads * context * (
        cfg.head_dim
    )
    tflops = flops / step_s / 1e12
    return {
        **stats,
        **graph_info,
        "step_time_ms": stats["time_ms"],
        "tokens_per_s": batch / step_s,
        "weight_bytes_per_step": weight_bytes,
        "kv_bytes_read_per_step": kv_bytes,
        "bytes_per_step": moved,
        "achieved_gb_s": gb_s,
        "bandwidth_fraction_of_spec_hbm": gb_s / (hbm * 1e3) if hbm else None,
        "flops_per_step": flops,
        "achieved_tflops": tflops,
        "fraction_of_bf16_peak": run.frac_of_peak(tflops),
    }


def _prefill_case(run: Run, model: DecodeModel, batch: int, prompt: int) -> dict[str, Any]:
    cfg = model.cfg
    tokens = torch.randint(0, cfg.vocab, (batch, prompt), device=run.device)
    cache = model.new_cache(batch, prompt)
    with torch.no_grad():
        stats = run.bench(
            lambda: model.prefill(tokens, cache), warmup=1, reps=3, min_rep_ms=0.0, max_s=4.0
        )
    t = stats["time_ms"] * 1e-3
    n_tok = batch * prompt
    flops = (
        2.0 * cfg.block_linear_params * n_tok
        + 2.0 * cfg.layers * batch * cfg.heads * prompt * prompt * cfg.head_dim
        + 2.0 * cfg.embedding_params * batch
    )
    tflops = flops / t / 1e12
    peak = run.peaks.get("bf16_dense_tflops")
    return {
        **stats,
        "prefill_time_ms": stats["time_ms"],
        "tokens_per_s": n_tok / t,
        "flops": flops,
        "achieved_tflops": tflops,
        "fraction_of_bf16_peak": run.frac_of_peak(tflops),
        "compute_eff_2n_total": (
            2.0 * cfg.total_params * n_tok / t / 1e12 / peak if peak else None
        ),
        "compute_eff_note": "compute_eff_2n_total = 2 * params_total * tokens / time / peak "
        "(the app's prefill formula)",
    }


def _serving_grid(
    run: Run, small: bool
) -> tuple[ModelCfg, list[int], list[int], list[tuple[int, int]]]:
    if run.tiny:
        return TINY_UNTIED, [32, 64], [1, 4], [(1, 32), (2, 32)]
    if small:
        cfg = LLAMA_3B
        if run.quick:
            return cfg, [2048], [1], []
        return cfg, [512, 2048, 8192], [1, 8, 32, 64, 128, 256, 512], [(1, 2048)]
    cfg = LLAMA_8B
    if run.quick:
        return cfg, [2048], [1, 64], [(1, 2048)]
    return (
        cfg,
        [512, 2048, 8192],
        [1, 8, 32, 64, 128, 256, 512],
        [(1, 512), (1, 2048), (1, 8192), (8, 2048)],
    )


def _serving(run: Run, small: bool) -> None:
    cfg, contexts, batches, prefills = _serving_grid(run, small)
    base = {"model": cfg.name, "shape": cfg.describe(), "dtype": "bf16", "weights": "random"}
    setup_failure = None
    model = None
    try:
        torch.manual_seed(0)
        model = DecodeModel(cfg, run.device)
        run.sync()
    except (*OOM_ERRORS, RuntimeError) as exc:
        setup_failure = _short(exc)
    if model is None:
        run.free()
        run.skip_rows("decode", [base], f"model setup failed: {setup_failure}", cfg.name)
        return
    run.log(f"decode {cfg.name}: weights {model.weight_bytes_per_step() / 1e9:.2f} GB")

    for context in contexts:
        rows = [
            {**base, "phase": "decode", "batch": b, "context": context, "kv_cache": "static"}
            for b in batches
        ]
        headroom = int(run.free_bytes() * 0.92) - 2 * GIB
        fits = []
        for row in rows:
            b = row["batch"]
            need = cfg.kv_bytes_per_token * b * context + 6 * b * cfg.vocab * 2
            row["kv_cache_bytes"] = cfg.kv_bytes_per_token * b * context
            if need > headroom:
                row.update(
                    status="skipped",
                    reason=f"memory: KV cache {row['kv_cache_bytes'] / 1e9:.1f} GB (+ logits) "
                    f"> {headroom / 1e9:.1f} GB free after weights",
                )
                run.data["decode"].append(row)
                run.log(f"decode {cfg.name} ctx {context} batch {b}: {row['reason']}")
            else:
                fits.append(row)
        run.save()
        if not fits:
            continue
        if run.left() < 3.0:
            run.skip_rows("decode", fits, "budget", f"{cfg.name} ctx {context}")
            continue
        b_max = max(r["batch"] for r in fits)
        try:
            cache = model.new_cache(b_max, context)
            cache[0].normal_()
            cache[1].normal_()
        except OOM_ERRORS as exc:
            cache = None
            reason = f"cache allocation: {_short(exc, 200)}"
        if cache is None:
            run.free()
            run.skip_rows("decode", fits, reason, f"{cfg.name} ctx {context}")
            continue
        for row in fits:
            b = row["batch"]
            run.measure(
                "decode",
                f"{cfg.name} ctx {context} batch {b}",
                row,
                3.0,
                functools.partial(_decode_case, run, model, cache, b, context),
                lambda r: (
                    f"{r['step_time_ms']:.2f} ms/step, {r['tokens_per_s']:.0f} tok/s, "
                    f"{r['achieved_gb_s']:.0f} GB/s, graph {r['cuda_graph']}"
                ),
            )
        del cache
        run.free()

    for batch, prompt in prefills:
        run.measure(
            "prefill",
            f"{cfg.name} batch {batch} prompt {prompt}",
            {**base, "phase": "prefill", "batch": batch, "prompt_len": prompt},
            3.0,
            functools.partial(_prefill_case, run, model, batch, prompt),
            lambda r: f"{r['prefill_time_ms']:.1f} ms, {r['achieved_tflops']:.0f} TFLOP/s",
        )
    del model
    run.free()


def section_decode(run: Run) -> None:
    _serving(run, small=False)


def section_decode_small(run: Run) -> None:
    if run.tiny:
        run.log("decode_small: tiny mode measures one serving model only")
        return
    _serving(run, small=True)


# attention -------------------------------------------------------------------------------------


def _attention_case(
    run: Run, b: int, hq: int, hkv: int, s: int, d: int, mode: str, backends: list[str]
) -> dict[str, Any]:
    dev = run.device
    grad = mode == "fwd_bwd"
    q = torch.randn(b, hq, s, d, device=dev, dtype=BF16, requires_grad=grad)
    k = torch.randn(b, hkv, s, d, device=dev, dtype=BF16, requires_grad=grad)
    v = torch.randn(b, hkv, s, d, device=dev, dtype=BF16, requires_grad=grad)
    ctx = _sdpa_backends(backends) if run.cuda else contextlib.nullcontext()
    with ctx:
        if grad:
            dout = torch.randn(b, hq, s, d, device=dev, dtype=BF16)

            def fn() -> Any:
                out = sdpa_gqa(q, k, v, causal=True)
                return torch.autograd.grad(out, (q, k, v), dout)
        else:

            def fn() -> Any:
                with torch.no_grad():
                    return sdpa_gqa(q, k, v, causal=True)

        stats = run.bench(fn, warmup=2, reps=5, min_rep_ms=25.0, max_s=2.0)
    fwd = 4.0 * b * hq * s * s * d / 2.0
    flops = fwd * (3.5 if grad else 1.0)
    tflops = run.tflops(flops, stats["time_ms"])
    return {
        **stats,
        "flops": flops,
        "tflops": tflops,
        "fraction_of_bf16_peak": run.frac_of_peak(tflops),
    }


def section_attention(run: Run) -> None:
    if run.tiny:
        tokens, hq, hkv, dims, seqs = 256, 4, 2, [16, 32], [64, 128]
    elif run.quick:
        tokens, hq, hkv, dims, seqs = 16384, 32, 8, [128], [4096]
    else:
        tokens, hq, hkv, dims, seqs = 16384, 32, 8, [64, 128], [2048, 4096, 8192]
    fused = ["cudnn", "flash", "efficient"]
    runs: list[tuple[str, list[str]]] = [("default_fused", fused)]
    if run.cuda and not run.quick:
        # cuDNN alone last: a kernel fault there would poison the CUDA context for the rest.
        runs += [("flash", ["flash"]), ("efficient", ["efficient"]), ("cudnn", ["cudnn"])]
    for label, backends in runs:
        for d in dims:
            for s in seqs:
                b = max(1, tokens // s)
                for mode in ("fwd", "fwd_bwd"):
                    inputs = {
                        "backends": label,
                        "mode": mode,
                        "batch": b,
                        "q_heads": hq,
                        "kv_heads": hkv,
                        "seq_len": s,
                        "head_dim": d,
                        "dtype": "bf16",
                        "causal": True,
                        "gqa": "enable_gqa=True" if SDPA_HAS_GQA else "kv heads repeated",
                    }
                    run.measure(
                        "attention",
                        f"{label} {mode} b{b} s{s} d{d}",
                        inputs,
                        1.5,
                        lambda b=b, s=s, d=d, mode=mode, backends=backends: _attention_case(
                            run, b, hq, hkv, s, d, mode, backends
                        ),
                        lambda r: f"{r['tflops']:.1f} TFLOP/s ({r['time_ms']:.2f} ms)",
                    )


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------

SECTIONS: tuple[tuple[str, Callable[[Run], None]], ...] = (
    ("gemm", section_gemm),
    ("memory", section_memory),
    ("train", section_train),
    ("decode", section_decode),
    ("attention", section_attention),
    ("train_fp8", section_train_fp8),
    ("decode_small", section_decode_small),
)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help=f"folder for {RESULT_FILE}")
    parser.add_argument("--budget-s", type=float, default=480.0, help="whole-run wall budget")
    parser.add_argument("--quick", action="store_true", help="a small subset (smoke test)")
    parser.add_argument(
        "--device",
        default="cuda",
        choices=["cuda", "cpu"],
        help="cpu runs tiny shapes as a code-path smoke test",
    )
    parser.add_argument(
        "--only",
        default=None,
        help="comma-separated sections to run (" + ",".join(n for n, _ in SECTIONS) + ")",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    run = Run(args)

    def on_term(signum: int, _frame: Any) -> None:
        raise Terminated(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    if args.device == "cuda" and not torch.cuda.is_available():
        run.data["status"] = "error"
        run.data["error"] = "CUDA is not available (use --device cpu for the smoke test)"
        run.cuda = False  # record what can be recorded without a GPU
        section_env(run)
        run.save()
        run.log(run.data["error"])
        return 2
    only = set(args.only.split(",")) if args.only else None
    scale = float(args.budget_s) / 480.0
    try:
        try:
            section_env(run)
        except Exception as exc:  # keep measuring without the missing environment fields
            run.data["env"]["error"] = _short(exc)
            run.log(f"env: error {run.data['env']['error']}")
        for name, fn in SECTIONS:
            info: dict[str, Any] = {}
            run.data["sections"][name] = info
            if only is not None and name not in only:
                info["status"] = "not selected"
                continue
            if run.left() < 3:
                info["status"] = "skipped: budget"
                run.log(f"{name}: skipped (budget)")
                run.save()
                continue
            t = time.monotonic()
            run.section_deadline = min(run.deadline, t + SECTION_CAPS_S[name] * scale)
            info["cap_s"] = round(run.section_deadline - t, 1)
            run.log(f"== {name} (up to {info['cap_s']:.0f} s)")
            try:
                fn(run)
                info["status"] = "done"
            except Terminated:
                raise
            except Exception as exc:  # a setup error: record it and go on
                info["status"] = "error"
                info["reason"] = _short(exc)
                info["traceback_tail"] = traceback.format_exc()[-1500:]
                run.log(f"{name}: error {info['reason']}")
            run.free()
            run.section_deadline = run.deadline
            info["wall_s"] = round(time.monotonic() - t, 2)
            info["gpu_state_after"] = run.gpu_state()
            run.save()
        run.data["status"] = "complete"
    except Terminated as exc:
        run.data["status"] = f"terminated ({exc})"
    except KeyboardInterrupt:
        run.data["status"] = "interrupted"
    run.data["finished_utc"] = _utc_now()
    run.save()
    counts: dict[str, int] = {}
    for key in ("gemm", "memory", "train", "decode", "prefill", "attention", "train_fp8"):
        for row in run.data[key]:
            counts[row["status"]] = counts.get(row["status"], 0) + 1
    run.log(f"{run.data['status']}: rows {counts} -> {run.path}")
    return 0 if run.data["status"] == "complete" else 1


if __name__ == "__main__":
    sys.exit(main())

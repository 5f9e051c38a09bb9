"""Matrix multiply C = A @ B with A (M, K) and B (K, N); shape is (M, N, K)."""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

from harness.ops.base import Shape, Tolerance
from harness.ops.registry import builtin_spec


@triton.jit
def _mm_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    EVEN_M: tl.constexpr,
    EVEN_N: tl.constexpr,
    EVEN_K: tl.constexpr,
    IEEE: tl.constexpr,
    UPCAST: tl.constexpr = False,
):
    # Grouped ordering: consecutive programs sweep a band of GROUP_M tile-rows
    # column by column, so the A band and the B columns they share stay in L2.
    pid = tl.program_id(0)
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    band = pid // (GROUP_M * tiles_n)
    band_first = band * GROUP_M
    band_rows = tl.minimum(tiles_m - band_first, GROUP_M)
    in_band = pid - band * (GROUP_M * tiles_n)
    tile_m = band_first + in_band % band_rows
    tile_n = in_band // band_rows

    offs_m = tile_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tile_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_n[None, :] * stride_bn
    m_ok = offs_m[:, None] < M
    n_ok = offs_n[None, :] < N

    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        if EVEN_K:
            if EVEN_M:
                a = tl.load(a_ptrs)
            else:
                a = tl.load(a_ptrs, mask=m_ok, other=0.0)
            if EVEN_N:
                b = tl.load(b_ptrs)
            else:
                b = tl.load(b_ptrs, mask=n_ok, other=0.0)
        else:
            k_ok = offs_k < K - k0
            a = tl.load(a_ptrs, mask=m_ok & k_ok[None, :], other=0.0)
            b = tl.load(b_ptrs, mask=k_ok[:, None] & n_ok, other=0.0)
        if UPCAST:
            # Interpreter only: it multiplies bfloat16 bit patterns in tl.dot
            # (triton-lang/triton#11584). bf16 products are exact in fp32, so
            # this matches the GPU's bf16 dot with fp32 accumulation.
            acc = tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
        elif IEEE:
            acc = tl.dot(a, b, acc, input_precision="ieee")
        else:
            acc = tl.dot(a, b, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk

    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=m_ok & n_ok)


def _cfg(bm: int, bn: int, bk: int, stages: int, warps: int, group: int = 8) -> triton.Config:
    return triton.Config(
        {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": group},
        num_stages=stages,
        num_warps=warps,
    )


# Hopper-oriented tiles (configs that do not fit shared memory for a dtype are
# skipped by the autotuner); the 32-deep ones are there for fp32.
_CONFIGS = [
    _cfg(128, 256, 64, 3, 8),
    _cfg(256, 128, 64, 3, 8),
    _cfg(128, 128, 64, 4, 4),
    _cfg(128, 128, 64, 4, 8),
    _cfg(64, 256, 32, 4, 4),
    _cfg(128, 64, 64, 4, 4),
    _cfg(64, 128, 64, 4, 4),
    _cfg(128, 128, 32, 3, 8),
    _cfg(64, 64, 32, 4, 4),
]

_mm_kernel_tuned = triton.autotune(configs=_CONFIGS, key=["M", "N", "K"])(
    triton.heuristics(
        {
            "EVEN_M": lambda args: args["M"] % args["BLOCK_M"] == 0,
            "EVEN_N": lambda args: args["N"] % args["BLOCK_N"] == 0,
            "EVEN_K": lambda args: args["K"] % args["BLOCK_K"] == 0,
        }
    )(_mm_kernel)
)

# (M, N, K, dtype, strides, device index) -> the config the autotuner chose. Filled only from
# the autotuner's own choice (best_config) on the first call of a key, so under
# `harness run --replay-from` it holds the replayed config: the harness seeds the autotuner's
# cache before the first case, and this cache follows.
_TUNED: dict[tuple, triton.Config] = {}

# Fixed config for the CPU interpreter, where the autotuner cannot time anything.
_CPU_BLOCK = (32, 32, 32)


def triton_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    assert a.dim() == 2 and b.dim() == 2 and a.shape[1] == b.shape[0], "mm takes (M, K) @ (K, N)"
    assert a.dtype == b.dtype, "mm takes two tensors of one dtype"
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), dtype=a.dtype, device=a.device)
    ieee = a.dtype == torch.float32
    strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    if a.device.type == "cpu":
        bm, bn, bk = _CPU_BLOCK
        grid = (triton.cdiv(m, bm) * triton.cdiv(n, bn),)
        _mm_kernel[grid](
            a,
            b,
            c,
            m,
            n,
            k,
            *strides,
            BLOCK_M=bm,
            BLOCK_N=bn,
            BLOCK_K=bk,
            GROUP_M=8,
            EVEN_M=m % bm == 0,
            EVEN_N=n % bn == 0,
            EVEN_K=k % bk == 0,
            IEEE=ieee,
            UPCAST=a.dtype == torch.bfloat16,
            num_warps=4,
        )
    else:
        key = (m, n, k, a.dtype, strides, a.device.index)
        cfg = _TUNED.get(key)
        if cfg is None:

            def tuned_grid(meta: dict[str, int]) -> tuple[int]:
                return (triton.cdiv(m, meta["BLOCK_M"]) * triton.cdiv(n, meta["BLOCK_N"]),)

            _mm_kernel_tuned[tuned_grid](a, b, c, m, n, k, *strides, IEEE=ieee)
            best = getattr(_mm_kernel_tuned, "best_config", None)
            if best is not None:
                _TUNED[key] = best
        else:
            # Launch the tuned config directly: skips the autotuner's and the
            # heuristics' per-call Python work, which shows on small products.
            # all_kwargs() is what the autotuner itself launches with (meta-parameters,
            # num_warps, num_stages, num_ctas, and maxnreg when set), so a replayed config
            # runs the same on both paths.
            kw = cfg.kwargs
            bm, bn, bk = kw["BLOCK_M"], kw["BLOCK_N"], kw["BLOCK_K"]
            _mm_kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn),)](
                a,
                b,
                c,
                m,
                n,
                k,
                *strides,
                **cfg.all_kwargs(),
                EVEN_M=m % bm == 0,
                EVEN_N=n % bn == 0,
                EVEN_K=k % bk == 0,
                IEEE=ieee,
            )
    return c


def torch_mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.mm(a, b)


def make_inputs(shape: Shape, dtype: torch.dtype, gen: torch.Generator, device: str):
    m, n, k = shape
    # Scale A by 1/sqrt(K) so each output, a sum of K products, is O(1).
    a = torch.randn((m, k), dtype=torch.float32, generator=gen, device=device)
    a = (a * (1.0 / math.sqrt(k))).to(dtype)
    b = torch.randn((k, n), dtype=dtype, generator=gen, device=device)
    return (a, b)


def _bytes(shape: Shape, itemsize: int) -> int:
    m, n, k = shape
    return (m * k + k * n + m * n) * itemsize


OP = builtin_spec(
    "mm",
    baseline=torch_mm,
    candidate=triton_mm,
    make_inputs=make_inputs,
    bytes_moved=_bytes,
    flops=lambda shape: 2 * shape[0] * shape[1] * shape[2],
    tolerances={
        "float32": Tolerance(atol=1e-3, rtol=1e-3),
        "float16": Tolerance(atol=2e-2, rtol=2e-2),
        "bfloat16": Tolerance(atol=2e-2, rtol=2e-2),
    },
)

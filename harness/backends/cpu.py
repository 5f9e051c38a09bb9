"""The CPU backend: Triton kernels run in the Triton interpreter, baselines on torch CPU.

Its timings mean little; its point is that the whole pipeline, correctness
checks included, runs in CI and on a laptop. So its timings are marked as not for comparison
(compare and gate refuse them unless --allow-cpu), and its op process runs torch on one
intra-op thread: with one thread per core, a busy 2-core host stretched a 6 us softmax to
milliseconds (benchmarks/cpu_threads.py, docs/compare.md "The cpu backend").
"""

from __future__ import annotations

from harness.backends.base import Backend, Capabilities

BACKEND = Backend(
    name="cpu",
    description="CPU only: Triton interpreter (TRITON_INTERPRET=1) against torch CPU; timer=cpu",
    aliases=("interpreter", "host"),
    torch_namespace=None,
    torch_extension=None,
    device_type="cpu",
    visibility_keys=(),
    capabilities=Capabilities(
        accelerator=False,
        device_events=False,
        graph_capture=False,
        profiler=False,
        triton_interpreter=True,
    ),
    hardware_verified="yes (any x86-64 host; CI)",
    timings_comparable=False,
    op_threads=1,
)

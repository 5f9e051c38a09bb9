"""Suite mode: a library's own benchmark suite (FlagGems' benchmark/) run under the harness.

- layout: which FlagGems tree a path is (v5.0 or v5.3 layout, flag_gems or flaggems_vllm, its ref)
- inventory: what the tree holds, read statically (no FlagGems import: that needs a GPU)
- select: which benchmarks a run covers and their op ids
- shapefile: FlagGems' shapes, and a --shapes-file override per op
- runner: planning, and the OpRunner that plugs the suite into the batch executor

The op process side is harness.child.plugins.suite and harness.child.latency_seam.
"""

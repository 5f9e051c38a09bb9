"""Upstream-suite mode: FlagGems' own benchmark suite run under the harness.

- nodes: where FlagGems' benchmark for an op lives and how its shapes map to ours
- shapefile: our shapes written in FlagGems' shape-file format (pure)
- timings, plugin: the harness timer in place of triton.testing.do_bench (one isolated plugin)
- convert: FlagGems' ``--record log`` results -> Measurement records (pure)
- runner, cli: planning and running it with the harness's batch machinery
"""

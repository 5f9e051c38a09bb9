"""run.json names the caches a run compiled into when they are kept between runs (`--triton-cache
user` with TRITON_CACHE_DIR/FLAGGEMS_CACHE_DIR set, as the corpus nightly does)."""

from __future__ import annotations

from harness.options import RunOptions
from harness.run.caches import named_caches


def test_a_kept_cache_is_named_and_a_runs_own_is_not() -> None:
    env = {"TRITON_CACHE_DIR": "/cache/fg-5.3.4-triton-3.7.1-torch-2.11/triton",
           "FLAGGEMS_CACHE_DIR": "/cache/fg-5.3.4-triton-3.7.1-torch-2.11/flaggems"}
    assert named_caches(RunOptions(triton_cache="user"), env) == {"triton": env["TRITON_CACHE_DIR"],
                                                                  "flaggems": env["FLAGGEMS_CACHE_DIR"]}
    assert named_caches(RunOptions(triton_cache="user"), {"TRITON_CACHE_DIR": "/c"}) == {"triton": "/c"}
    assert named_caches(RunOptions(), env) == {}  # isolated: the run's own folder, removed at its end

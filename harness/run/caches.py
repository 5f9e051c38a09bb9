"""The run's own compiler caches: a Triton cache (and FlagGems' cache and LibTuner database)
per run, so a run compiles and tunes what it measures and leaves no state behind.

With ``--triton-cache isolated`` (the default) every op process of a run gets
``TRITON_CACHE_DIR=RUN/triton-cache/triton`` and ``FLAGGEMS_CACHE_DIR=RUN/triton-cache/flaggems``
(FlagGems keeps its generated code and its LibTuner SQLite database of tuned configs there);
the folder is removed when the run ends unless ``--keep-triton-cache``. The op processes of a
run share it, so a retried attempt or the measurement after a sweep reuses what was compiled.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path

from harness.options import RunOptions

__all__ = ["CACHE_DIR", "cache_env", "named_caches", "remove_run_cache", "run_cache_dir", "tune_cache_env"]

CACHE_DIR = "triton-cache"


def run_cache_dir(options: RunOptions, run_dir: Path) -> Path | None:
    """The run's cache folder, or None when the run uses the user's caches."""
    return Path(run_dir) / CACHE_DIR if options.triton_cache == "isolated" else None


def cache_env(cache_dir: Path | None) -> dict[str, str]:
    """What an op process's environment gets for the run's caches (nothing without one)."""
    if cache_dir is None:
        return {}
    return {"TRITON_CACHE_DIR": str(cache_dir / "triton"), "FLAGGEMS_CACHE_DIR": str(cache_dir / "flaggems")}


def tune_cache_env(cache_dir: Path | None, index: int) -> dict[str, str]:
    """:func:`cache_env` for the ``index``-th tuning process of a sweep: FlagGems' LibTuner database
    is one per process, so parallel processes never wait on each other's locks."""
    if cache_dir is None:
        return {}
    (cache_dir / "flaggems").mkdir(parents=True, exist_ok=True)
    return {**cache_env(cache_dir), "FLAGGEMS_DB_URL": f"sqlite:///{cache_dir / 'flaggems' / f'sweep-{index}.db'}"}


def remove_run_cache(options: RunOptions, run_dir: Path) -> bool:
    """Remove the run's cache unless the options keep it; whether something was removed."""
    folder = run_cache_dir(options, run_dir)
    if folder is None or options.keep_triton_cache or not folder.exists():
        return False
    shutil.rmtree(folder, ignore_errors=True)
    return True


def named_caches(options: RunOptions, env: Mapping[str, str]) -> dict[str, str]:
    """The caches a run with ``--triton-cache user`` compiles into, as run.json names them: the
    folders ``TRITON_CACHE_DIR`` and ``FLAGGEMS_CACHE_DIR`` give (a cache kept between runs, such
    as the corpus nightly's, keyed by the versions that compiled it); empty for a run's own cache."""
    if options.triton_cache != "user":
        return {}
    return {name: env[var] for name, var in (("triton", "TRITON_CACHE_DIR"), ("flaggems", "FLAGGEMS_CACHE_DIR"))
            if env.get(var)}

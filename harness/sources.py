"""Every source of ops `harness run` knows, and the one way a run is prepared from them.

A new run takes its ops from the first source that claims its options; a resumed run from the
source that made it (its run.json says). Adding a source is adding it here: the executor
(harness.run) names none of them."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from harness.options import RunOptions
from harness.run.builtin import BUILTIN
from harness.run.execute import Prepared
from harness.run.execute import prepare as prepare_source
from harness.run.execute import prepare_resume as resume_source
from harness.run.source import Source
from harness.suite.runner import SUITE

__all__ = ["SOURCES", "prepare", "prepare_resume", "source_for"]

# In order: the first that claims a run's options is its source; the harness's own ops claim any.
SOURCES: tuple[Source, ...] = (SUITE, BUILTIN)


def source_for(options: RunOptions) -> Source:
    return next(s for s in SOURCES if s.claims(options))


def prepare(options: RunOptions, env: Mapping[str, str], all_ops: bool = False) -> Prepared:
    """Validate and plan a new run (``all_ops``: ``--all``); nothing is written yet."""
    return prepare_source(options, env, source_for(options), all_ops)


def prepare_resume(run_dir: Path, env: Mapping[str, str]) -> Prepared:
    """The run stored in ``run_dir``, to finish what it did not."""
    return resume_source(run_dir, env, SOURCES)

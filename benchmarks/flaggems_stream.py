"""A pytest plugin for FlagGems' own benchmark runner (v5.3 layout): each benchmark's result is
appended to the JSON-lines file named by ``FLAGGEMS_STREAM`` the moment FlagGems records it.

FlagGems writes ``--record json`` only at the end of its session, and ``--record log`` to a file
named after its whole command line (too long for a file name with a dozen nodes). A runner cut
by its time budget then leaves nothing. With ``-p flaggems_stream`` (this folder on PYTHONPATH),
what finished before the cut is kept: after collection, the benchmark base module's
``update_result`` (which FlagGems' ``Benchmark.run`` calls with each ``BenchmarkResult`` as a dict,
whatever ``--record`` says) is wrapped to write the line first, and so is ``emit_record_logger``
in a test module that records through it alone (a ``run`` of its own). Used by
``benchmarks/flaggems_corpus.py`` (caliber, throughput).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["as_result", "pytest_collection_finish", "stream_emitted", "stream_into"]


def as_result(data: Any) -> Any:
    """A result as FlagGems hands it over: a dict (base.py's ``Benchmark.run``) or the JSON text of
    one (benchmarks with a ``run`` of their own, ``BenchmarkResult.to_json()``): the dict."""
    if isinstance(data, str):
        try:
            return json.loads(data)
        except ValueError:
            return data
    return data


def _append(path: str, data: Any) -> None:
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps(as_result(data), default=str) + "\n")


def stream_into(module: Any, path: str) -> bool:
    """Wrap ``module.update_result`` to append each result to ``path``; False if already wrapped."""
    original: Callable[[Any, Any], Any] = module.update_result
    if getattr(original, "_flaggems_stream", False):
        return False

    def update_result(op: Any, data: Any) -> Any:
        _append(path, data)
        return original(op, data)

    update_result._flaggems_stream = True  # type: ignore[attr-defined]
    module.update_result = update_result
    return True


def stream_emitted(module: Any, path: str) -> bool:
    """Wrap ``module.emit_record_logger`` to append each result it is given to ``path``: a module
    whose benchmarks record through it alone (their own ``run``, no ``update_result``: FlagGems'
    test_blas_perf_parallel.py). Messages that are no result (an op's attributes) are passed on
    only. False if already wrapped."""
    original: Callable[[Any], Any] = module.emit_record_logger
    if getattr(original, "_flaggems_stream", False):
        return False

    def emit_record_logger(message: Any) -> Any:
        found = as_result(message)
        if isinstance(found, dict) and "result" in found:
            _append(path, found)
        return original(message)

    emit_record_logger._flaggems_stream = True  # type: ignore[attr-defined]
    module.emit_record_logger = emit_record_logger
    return True


def pytest_collection_finish(session: Any) -> None:
    path = os.environ.get("FLAGGEMS_STREAM")
    if not path:
        return
    for module in list(sys.modules.values()):
        # a module that records results: base.py (Benchmark) or a test module with a run of its own
        # (BenchmarkResult); conftest.py, which defines both functions, holds neither
        records = any(isinstance(getattr(module, name, None), type) for name in ("Benchmark", "BenchmarkResult"))
        if not records:
            continue
        if callable(getattr(module, "update_result", None)):
            stream_into(module, path)
        elif callable(getattr(module, "emit_record_logger", None)):
            stream_emitted(module, path)

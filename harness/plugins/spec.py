"""The child spec: everything an op's pytest process needs, written by the parent as JSON.

The child reads this file and nothing else of the parent's options, so what a
child did is always reproducible from the run directory.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["ChildSpec"]


@dataclass(frozen=True)
class ChildSpec:
    run_id: str
    run_dir: str
    backend: str
    device: str
    op: str
    provider: str
    dtypes: tuple[str, ...]
    shapes: tuple[tuple[int, ...], ...]
    seed: int
    timer: str
    cache: str = "cold"
    ops_modules: tuple[str, ...] = ()
    warmup_ms: float = 25.0
    rep_ms: float = 100.0
    skip_cases: tuple[str, ...] = ()  # case ids already recorded (resume)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def records_path(self) -> Path:
        return Path(self.run_dir) / "records.jsonl"

    def dump(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: Path) -> ChildSpec:
        data = json.loads(Path(path).read_text())
        data["dtypes"] = tuple(data["dtypes"])
        data["shapes"] = tuple(tuple(s) for s in data["shapes"])
        data["ops_modules"] = tuple(data.get("ops_modules", ()))
        data["skip_cases"] = tuple(data.get("skip_cases", ()))
        return cls(**data)

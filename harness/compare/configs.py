"""Which autotune configs base and head chose for a row (the runs' ``autotune/<op>.json``).

A row is one (op, dtype, shape); an autotuner's decision is one (kernel, key), the key being
Triton's cache key: the key arguments' values, then the tensor dtypes. A decision belongs to a
row when the key's integers are among the row's dimensions and its dtypes are the row's dtype
(a kernel keyed on a derived number, a padded size say, matches no row: then the op's
decisions are compared as a whole). Pure functions; ``read_configs`` is the one reader.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.autotune.store import OpAutotune, TunedConfig, op_autotune_path, read_op_autotune

__all__ = ["config_change", "describe_config", "key_matches", "read_configs"]


def read_configs(run_dir: Path, op: str) -> OpAutotune | None:
    """The op's recorded configs in a run; None when the run has none or the file is unreadable
    (the comparison goes on without them: configs are shown, never judged)."""
    path = op_autotune_path(run_dir, op)
    if not path.is_file():
        return None
    try:
        return read_op_autotune(path)
    except (ValueError, OSError):
        return None


def key_matches(key: Sequence[str], dtype: str, shape: Sequence[int]) -> bool:
    ints: list[int] = []
    for part in key:
        tag, _, body = part.partition(":")
        if tag == "int":
            ints.append(int(body))
        elif tag == "str" and body.startswith("torch.") and body != f"torch.{dtype}":
            return False
    if not ints:
        return False
    return not (Counter(ints) - Counter(int(d) for d in shape))


def describe_config(c: TunedConfig | None) -> str:
    if c is None:
        return "none recorded"
    parts = [f"{k}={v}" for k, v in sorted(c.kwargs.items())]
    for name, short in (("num_warps", "warps"), ("num_stages", "stages"), ("num_ctas", "ctas"), ("maxnreg", "maxnreg")):
        value = getattr(c, name)
        if value is not None and not (name == "num_ctas" and value == 1):
            parts.append(f"{short}={value}")
    return ",".join(parts) or "defaults"


def _same(a: TunedConfig | None, b: TunedConfig | None) -> bool:
    if a is None or b is None:
        return a is b
    return (dict(a.kwargs), a.num_warps, a.num_stages, a.num_ctas, a.maxnreg) == (
        dict(b.kwargs), b.num_warps, b.num_stages, b.num_ctas, b.maxnreg)


def _by_key(record: OpAutotune | None) -> Mapping[tuple[str, tuple[str, ...]], TunedConfig]:
    return {(c.kernel, c.key): c for c in record.configs} if record else {}


def config_change(base: OpAutotune | None, head: OpAutotune | None, dtype: str, shape: Sequence[int]) -> str:
    """What differs between the configs base and head chose for this row ("" when nothing does,
    or when either run recorded none)."""
    if base is None or head is None:
        return ""
    b, h = _by_key(base), _by_key(head)
    keys = [k for k in dict.fromkeys([*b, *h]) if key_matches(k[1], dtype, shape)]
    if keys:
        changes = [f"{kernel}: {describe_config(b.get((kernel, key)))} -> {describe_config(h.get((kernel, key)))}"
                   for kernel, key in keys if not _same(b.get((kernel, key)), h.get((kernel, key)))]
        return "; ".join(changes)
    differing = [k for k in dict.fromkeys([*b, *h]) if not _same(b.get(k), h.get(k))]
    if differing:
        kernels = sorted({k[0] for k in differing})
        return (f"the op's autotuners chose differently at {len(differing)} key(s) not matched to this "
                f"shape ({', '.join(kernels)}); see autotune/{base.op}.json of both runs")
    return ""

"""The compile gate: an earlier compile against this one, variant by variant (pure).

A variant is (op, kernel variant id, target): the same kernel with the same argument types,
constexprs and launch options. A regression is a variant that compiled before and does not
now, or whose registers, spills or shared memory grew past the thresholds, or that no longer
fits the target's shared memory. Variants only on one side are listed, not judged (a changed
specialisation makes a new id).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Finding", "Thresholds", "judge", "render_findings", "variants"]

Key = tuple[str, str, str]


@dataclass(frozen=True)
class Thresholds:
    pct: float = 10.0  # growth in percent past which registers, spills or shared memory regress
    regs_abs: int = 4  # and by at least this many registers
    shared_abs: int = 1024  # and by at least this many bytes of shared memory


@dataclass(frozen=True)
class Finding:
    kind: str  # stops-compiling, registers, spills, shared, no-longer-fits, new, gone, fixed
    op: str
    target: str
    label: str
    detail: str
    regression: bool


def variants(result: Mapping[str, Any]) -> dict[Key, Mapping[str, Any]]:
    """A compile.json's variants by (op, variant id, target)."""
    found: dict[Key, Mapping[str, Any]] = {}
    for entry in result.get("variants", []):
        found[(str(entry["op"]), str(entry["variant"]), str(entry["target"]))] = entry
    return found


def _grew(base: Any, head: Any, pct: float, minimum: int) -> bool:
    if not isinstance(base, int) or not isinstance(head, int) or head <= base:
        return False
    return head - base >= minimum and head > base * (1 + pct / 100)


def _compare(key: Key, base: Mapping[str, Any], head: Mapping[str, Any], t: Thresholds) -> list[Finding]:
    op, _, target = key
    label = str(head.get("label") or base.get("label"))
    out: list[Finding] = []
    if base.get("ok") and not head.get("ok"):
        return [Finding("stops-compiling", op, target, label, str(head.get("error", "")), True)]
    if not base.get("ok") and head.get("ok"):
        return [Finding("fixed", op, target, label, f"compiles again (was: {base.get('error', '')})", False)]
    if not head.get("ok"):
        return []
    b, h = base.get("ir", {}), head.get("ir", {})
    if _grew(b.get("regs"), h.get("regs"), t.pct, t.regs_abs):
        out.append(Finding("registers", op, target, label, f"{b['regs']} -> {h['regs']} registers", True))
    bs, hs = b.get("spills"), h.get("spills")
    if isinstance(bs, int) and isinstance(hs, int) and hs > bs and (bs == 0 or hs > bs * (1 + t.pct / 100)):
        out.append(Finding("spills", op, target, label, f"{bs} -> {hs} spilled registers", True))
    if _grew(b.get("shared"), h.get("shared"), t.pct, t.shared_abs):
        out.append(Finding("shared", op, target, label, f"{b['shared']} -> {h['shared']} bytes of shared memory", True))
    if base.get("fits") is True and head.get("fits") is False:
        out.append(Finding("no-longer-fits", op, target, label,
                           f"{h.get('ir', {}).get('shared')} bytes of shared memory: over the target's limit", True))
    return out


def judge(base: Mapping[str, Any], head: Mapping[str, Any], thresholds: Thresholds = Thresholds()) -> list[Finding]:
    """Every finding, regressions first."""
    b, h = variants(base), variants(head)
    findings: list[Finding] = []
    for key in sorted(set(b) & set(h)):
        findings += _compare(key, b[key], h[key], thresholds)
    for key in sorted(set(h) - set(b)):
        entry = h[key]
        findings.append(Finding("new", key[0], key[2], str(entry.get("label")),
                                "compiles" if entry.get("ok") else f"does not compile: {entry.get('error', '')}", False))
    for key in sorted(set(b) - set(h)):
        findings.append(Finding("gone", key[0], key[2], str(b[key].get("label")), "not compiled any more", False))
    return sorted(findings, key=lambda f: not f.regression)


def _cell(text: Any) -> str:
    return str(text).replace("|", "/").replace("\n", " ")


def render_findings(findings: Sequence[Finding], base: str, head: str, thresholds: Thresholds) -> str:
    bad = [f for f in findings if f.regression]
    lines = [
        f"# Compile gate: {'FAIL' if bad else 'pass'}",
        "",
        f"- base: {base}",
        f"- head: {head}",
        f"- rule: a variant that compiled and does not now; registers grown by >{thresholds.pct:g}% and "
        f">={thresholds.regs_abs}; shared memory by >{thresholds.pct:g}% and >={thresholds.shared_abs} bytes; any "
        "new spills; a variant that no longer fits the target's shared memory",
        "",
    ]
    counts: dict[str, int] = {}
    for f in findings:
        counts[f.kind] = counts.get(f.kind, 0) + 1
    lines += ["Counts: " + (", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "no differences"), ""]
    if findings:
        lines += ["| verdict | kind | op | target | variant | detail |", "|---|---|---|---|---|---|"]
        for f in findings:
            lines.append(f"| {'REGRESSION' if f.regression else 'info'} | {f.kind} | {_cell(f.op)} | {f.target} | "
                         f"{_cell(f.label)} | {_cell(f.detail)} |")
    return "\n".join(lines) + "\n"


def summary_table(results: Iterable[Mapping[str, Any]]) -> list[str]:
    """compile.md's table: per target and op, what compiled and the largest resources."""
    lines = ["| target | op | variants | failed | max regs | max spills | max shared B | over shared limit | compile s |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in results:
        vs = r.get("variants", [])
        irs = [v.get("ir", {}) for v in vs]

        def top(key: str, irs: list[Any] = irs) -> str:
            values = [i.get(key) for i in irs if isinstance(i.get(key), int)]
            return str(max(values)) if values else ""

        seconds = sum(i.get("compile_ms", 0.0) or 0.0 for i in irs) / 1e3
        lines.append(f"| {r.get('target')} | {r.get('op')} | {len(vs)} | {sum(not v.get('ok') for v in vs)} | "
                     f"{top('regs')} | {top('spills')} | {top('shared')} | "
                     f"{sum(v.get('fits') is False for v in vs)} | {seconds:.1f} |")
    return lines

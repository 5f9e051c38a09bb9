"""Compare runs, gate pull requests, and keep a nightly history (see docs/compare.md)."""

from __future__ import annotations

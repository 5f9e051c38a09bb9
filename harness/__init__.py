"""Containerised multi-vendor benchmark and CI harness for Triton operators."""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"

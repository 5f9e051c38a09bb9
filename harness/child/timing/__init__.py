"""Timers: each returns raw per-call samples in milliseconds; statistics live in results.schema."""

"""Autotune record and replay: which config each autotuner chose, per kernel and key.

store.py holds the formats (autotune/<op>.json, meta.json) and the parent's check of a replay
source; tuners.py seeds and watches autotuner objects (plain Python, unit-tested with fakes);
the pytest plugin that touches Triton in the op process is harness/child/plugins/autotune.py.
"""

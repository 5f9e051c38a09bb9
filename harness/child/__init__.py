"""The op process: one per op and attempt, started by the parent (``harness.run``).

``python -m harness.child`` (process.py) runs pytest on test_cases.py with the harness's
plugins (plugins/), which load the child spec (harness.contract), measure each case
(measure.py, timers in timing/) and append one record per case to the run's records.jsonl.
Nothing here is imported by the parent process.
"""

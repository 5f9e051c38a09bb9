"""`harness compile`: every built-in kernel compiled ahead of time for GPU targets this machine
does not have (Triton's GPUTarget), its IR and metadata kept, and a gate against an earlier
compile (docs/compile.md).

targets.py and gate.py are pure; trace.py, build.py and worker.py touch torch and Triton and
run in worker processes (``python -m harness.compile.worker``); cli.py plans and runs them.
"""

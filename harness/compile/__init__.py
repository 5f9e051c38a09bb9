"""`harness compile`: every built-in kernel compiled ahead of time for GPU targets this machine
does not have (Triton's GPUTarget), its IR and metadata kept, and a gate against an earlier
compile (docs/compile.md).

targets.py and gate.py are pure; kernels.py and worker.py touch torch and Triton and run in
worker processes (``python -m harness.compile.worker``); cli.py plans the tasks and runs the
workers as op processes are run (harness.run.spawn: a session each, a timeout, the group ended).
"""

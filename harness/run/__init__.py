"""The parent process of `harness run`: it plans a run and supervises one process per op.

- plan.py, select.py, plugins.py: pure planning (which ops, shapes, devices, plugins)
- decide.py: pure decisions (how an op ended, whether to retry)
- rundir.py: the run directory (markers, torn lines, lock, versioned run.json)
- spawn.py: op processes (environment, command, hold/release, process groups)
- batch.py: devices x ops behind the OpRunner protocol
- execute.py: prepare, execute and finalise a run
- provenance.py: git, the one fingerprint of a run
- progress.py, report.py: what the user sees while and after it runs

Nothing here imports torch, Triton or pytest: those live in the op process (harness.child).
"""

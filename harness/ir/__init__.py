"""Compiled kernels' IR and metadata: what Triton produced for a kernel, for a run's cases
(the op process's ``ir`` plugin, RUN/ir/) and for targets without hardware (`harness compile`).

meta.py reads Triton's compile metadata and the backends' assembly into a compact summary
(pure, tested without a GPU); capture.py listens to Triton's compilations in a process and
keeps the files.
"""

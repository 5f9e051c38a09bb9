"""Containers: one image per backend, device passthrough, runs through the docker SDK.

Layout: ``plan`` (pure: devices, mounts, user, command, the confinement),
``host`` (what the host has: nodes, driver files, sysfs links), ``image``
(content-hash tags; reuse, pull or build; the image ID that runs), ``engine``
(docker SDK I/O), ``launch`` (the order of a whole job), ``gate`` (each side of
`gate-run --container`), ``cli`` (argparse). The options (registry, image policy, base images, build
arguments, wheels, devices, what HARNESS_* crosses in) are resolved in
harness.options (``resolve_container_options``), the one options layer; nothing
here reads HARNESS_* itself. Importing this package imports neither docker nor torch.
"""

from __future__ import annotations

__all__: list[str] = []

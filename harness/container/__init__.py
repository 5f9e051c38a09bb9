"""Containers: one image per backend, device passthrough, runs through the docker SDK.

Layout: ``settings`` (options, env read once), ``plan`` (pure: devices, mounts,
user, command), ``host`` (what the host has: nodes, driver files), ``image``
(content-hash tags; reuse, pull or build), ``engine`` (docker SDK I/O),
``runner`` (the order of a whole job), ``cli`` (argparse). Importing this
package imports neither docker nor torch.
"""

from __future__ import annotations

__all__: list[str] = []

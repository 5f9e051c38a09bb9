"""What the host offers a container of one backend: device nodes, driver files, groups (I/O).

The only file-system reads of the container layer; the planner
(:mod:`harness.container.plan`) gets the result as a frozen HostView.
"""

from __future__ import annotations

import glob
import grp
import os
import posixpath
import stat
from collections.abc import Iterable

from harness.backends.base import Backend
from harness.container.plan import HostView, NodeInfo, device_templates_index

__all__ = ["probe_host"]


def _node_info(path: str) -> NodeInfo | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    if stat.S_ISCHR(st.st_mode):
        return NodeInfo(kind="char", gids=(st.st_gid,))
    if stat.S_ISBLK(st.st_mode):
        return NodeInfo(kind="block", gids=(st.st_gid,))
    if stat.S_ISDIR(st.st_mode):
        gids: list[int] = []
        for dirpath, _dirs, files in os.walk(path):
            for name in files:
                try:
                    child = os.stat(os.path.join(dirpath, name))
                except OSError:
                    continue
                if stat.S_ISCHR(child.st_mode) and child.st_gid not in gids:
                    gids.append(child.st_gid)
        return NodeInfo(kind="dir", gids=tuple(gids))
    return NodeInfo(kind="other")


def _parent_device(view: HostView, vendor: str) -> str | None:
    """The device a character node belongs to: the kernel's /sys/dev/char/MAJOR:MINOR/device link
    (for a GPU's nodes, its PCI device), or None when the node or the link is not there."""
    try:
        st = os.stat(view.host_path(vendor))
    except OSError:
        return None
    if not stat.S_ISCHR(st.st_mode):
        return None
    link = view.host_path(f"/sys/dev/char/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}/device")
    if not os.path.exists(link):
        return None
    return os.path.realpath(link)


def _vendor_path(root: str, host_path: str) -> str:
    return "/" + posixpath.relpath(host_path, root).lstrip("/")


def _per_device_nodes(backend: Backend, view: HostView, wanted: set[str]) -> set[int]:
    """Add the per-device nodes found on the host to ``wanted``; the device indices the first
    template names."""
    ids: set[int] = set()
    for position, template in enumerate(backend.passthrough.per_device_nodes):
        pattern, regex = device_templates_index(template)
        for found in glob.glob(view.host_path(pattern)):
            vendor = _vendor_path(view.device_root, found)
            match = regex.match(vendor)
            if match is None:
                continue
            wanted.add(vendor)
            if position == 0:  # the first template names the devices
                index = match.groupdict().get("index")
                ids.add(int(index) if index is not None else int(match.group("render")) - 128)
    return ids


def probe_host(backend: Backend, device_root: str, runtimes: Iterable[str]) -> HostView:
    """Look under ``device_root`` for everything ``backend``'s passthrough may need."""
    pt = backend.passthrough
    root = device_root or "/"
    view = HostView(device_root=root)
    wanted = set(pt.shared_nodes) | set(pt.all_device_nodes) | set(pt.host_nodes)
    ids = _per_device_nodes(backend, view, wanted)
    for pattern in pt.device_siblings:
        wanted.update(_vendor_path(root, found) for found in glob.glob(view.host_path(pattern)))
    nodes = {}
    parents = {}
    for vendor in sorted(wanted):
        info = _node_info(view.host_path(vendor))
        if info is not None:
            nodes[vendor] = info
        parent = _parent_device(view, vendor) if pt.device_siblings else None
        if parent is not None:
            parents[vendor] = parent
    paths = frozenset(
        src for src, _ in pt.mounts + pt.optional_mounts if os.path.exists(view.host_path(src))
    )
    groups = {}
    for name in pt.groups:
        try:
            groups[name] = grp.getgrnam(name).gr_gid
        except KeyError:
            continue
    return HostView(
        device_root=root,
        nodes=nodes,
        device_ids=tuple(str(i) for i in sorted(ids) if i >= 0),
        paths=paths,
        runtimes=frozenset(runtimes),
        groups=groups,
        node_devices=parents,
    )

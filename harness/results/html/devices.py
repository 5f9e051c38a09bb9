"""Datasheet peaks of the devices the pages know, each with where its numbers come from.

A backend's ``Peaks`` (harness/backends) describe one representative device of the vendor;
a run page must use the peaks of the device that ran, so the roofline is drawn only for a
device named in :data:`KNOWN_DEVICES`. A device this table does not know gets no roofline,
and the page says why (a percentage of another device's peak would be wrong, not rough).

Matching is on the name torch reports (``identity.device_name`` in run.json, the records'
``device_name``), case-insensitive, first entry whose every word occurs in the name.
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.backends.base import Peaks

__all__ = ["KNOWN_DEVICES", "DevicePeaks", "PeakChoice", "choose_peaks", "device_peaks"]


@dataclass(frozen=True)
class DevicePeaks:
    """One device's ceilings: memory bandwidth and the dense (no sparsity) bf16 matrix rate."""

    words: tuple[str, ...]  # every word must occur in the reported device name
    peaks: Peaks
    source: str  # the document the two numbers come from


# More specific names first: "H200 NVL" before "H200", "A100 40GB" before "A100".
KNOWN_DEVICES: tuple[DevicePeaks, ...] = (
    DevicePeaks(("h200", "nvl"), Peaks("H200 NVL", 4800.0, 835.0),
                "NVIDIA H200 Tensor Core GPU datasheet (H200 NVL column; bf16 dense is half the sparse figure)"),
    DevicePeaks(("h200",), Peaks("H200 SXM", 4800.0, 989.0),
                "NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column; bf16 dense is half the sparse figure)"),
    DevicePeaks(("h100", "pcie"), Peaks("H100 PCIe", 2000.0, 756.0),
                "NVIDIA H100 Tensor Core GPU datasheet (H100 PCIe column; bf16 dense is half the sparse figure)"),
    DevicePeaks(("h100", "nvl"), Peaks("H100 NVL", 3900.0, 835.0),
                "NVIDIA H100 Tensor Core GPU datasheet (H100 NVL column; bf16 dense is half the sparse figure)"),
    DevicePeaks(("h100",), Peaks("H100 SXM", 3350.0, 989.0),
                "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column; bf16 dense is half the sparse figure)"),
    DevicePeaks(("a100", "40gb"), Peaks("A100 40GB", 1555.0, 312.0),
                "NVIDIA A100 Tensor Core GPU datasheet (A100 40GB column)"),
    DevicePeaks(("a100", "pcie"), Peaks("A100 80GB PCIe", 1935.0, 312.0),
                "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB PCIe column)"),
    DevicePeaks(("a100",), Peaks("A100 80GB SXM", 2039.0, 312.0),
                "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM column)"),
    DevicePeaks(("mi300x",), Peaks("MI300X", 5300.0, 1307.4),
                "AMD Instinct MI300X accelerator data sheet (peak memory bandwidth; bf16 dense matrix)"),
)


def _words(name: str) -> set[str]:
    cleaned = "".join(ch if ch.isalnum() else " " for ch in name.lower())
    return set(cleaned.split())


def device_peaks(device_name: str) -> tuple[DevicePeaks | None, str]:
    """(the table's entry for ``device_name``, why there is none); the reason is empty when found."""
    if not device_name or device_name == "?":
        return None, "the run does not name its device"
    have = _words(device_name)
    # Names such as "NVIDIA A100-SXM4-80GB" split into words on punctuation; "80GB" stays whole.
    for entry in KNOWN_DEVICES:
        if all(w in have for w in entry.words):
            return entry, ""
    return None, (f"{device_name!r} is not in the table of known devices "
                  "(harness/results/html/devices.py), so no datasheet peak is known for it")


@dataclass(frozen=True)
class PeakChoice:
    """The peaks a page uses for a device, where they come from, or why there are none."""

    device_name: str
    peaks: Peaks | None
    source: str = ""
    reason: str = ""  # set when ``peaks`` is None


def choose_peaks(device_name: str, offered: Peaks | None = None) -> PeakChoice:
    """The table's peaks for ``device_name``; else ``offered`` (a backend's representative
    device) only when its name names the device that ran; else none, with the reason."""
    entry, reason = device_peaks(device_name)
    if entry is not None:
        return PeakChoice(device_name, entry.peaks, entry.source)
    if offered is not None and device_name and _words(offered.device) <= _words(device_name):
        return PeakChoice(device_name, offered, "the backend's own peaks (harness/backends), which name this device")
    return PeakChoice(device_name, None, reason=reason)

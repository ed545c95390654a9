"""The machine a generated record was measured on: recorded with the results, stated once on their page."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any


def record() -> dict[str, Any]:
    """CPU count and model, memory (`free -g`, as recorded since the first benchmark) and kernel."""
    cpuinfo = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").is_file() else []
    models = [line.split(":", 1)[1].strip() for line in cpuinfo if line.startswith("model name")]
    free = subprocess.run(["free", "-g"], capture_output=True, text=True, check=False).stdout.strip()
    return {
        "nproc": str(os.cpu_count() or ""),
        "free_g": free,
        "cpu": models[0] if models else platform.processor(),
        "kernel": platform.release(),
    }


def summary(machine: dict[str, Any] | None) -> str:
    """One line: "2 cores (AMD EPYC), 23 GiB, kernel 6.18.44", or "not recorded"."""
    if not machine:
        return "not recorded"
    parts = [f"{machine.get('nproc', '?')} cores ({machine.get('cpu') or 'unknown CPU'})"]
    mem = next((line.split() for line in str(machine.get("free_g", "")).splitlines() if line.startswith("Mem:")), [])
    if len(mem) > 1:
        parts.append(f"{mem[1]} GiB")
    if machine.get("kernel"):
        # The release's build suffix names the host's image, not the kernel.
        parts.append(f"kernel {str(machine['kernel']).split('-', 1)[0]}")
    return ", ".join(parts)

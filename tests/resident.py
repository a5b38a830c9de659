"""How much of a file this process holds in resident memory through its mappings (Linux)."""

from __future__ import annotations

from pathlib import Path

#: Tests that read it skip where the kernel does not publish it.
HAS_SMAPS = Path("/proc/self/smaps").exists()


def resident_kb(path: Path) -> int:
    """Resident kB of this process's mappings of ``path`` (``/proc/self/smaps``)."""
    total, inside = 0, False
    with open("/proc/self/smaps", encoding="utf-8") as smaps:
        for line in smaps:
            first = line.split(" ", 1)[0]
            if "-" in first and not first.endswith(":"):  # a mapping's header line
                inside = line.rstrip("\n").endswith(str(path))
            elif inside and line.startswith("Rss:"):
                total += int(line.split()[1])
    return total

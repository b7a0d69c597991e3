"""How a reference names what it cites: the file, the pages and the sections
its chunks came from (``report.pdf p. 3, 12–13, §Results``)."""

from __future__ import annotations

from collections.abc import Sequence

from ragkit.schema import Location

_UNIT = {"page": "p. ", "slide": "slide ", "sheet": "sheet "}


def citation(name: str, locations: Sequence[Location | None]) -> str:
    known = sorted((loc for loc in locations if loc is not None), key=lambda loc: loc.char_start)
    parts = [name]
    pages = sorted({p for loc in known if loc.page_start is not None
                    for p in range(loc.page_start, (loc.page_end or loc.page_start) + 1)})
    if pages:
        parts.append(_UNIT[known[0].unit] + _ranges(pages))
    sections = list(dict.fromkeys(loc.section for loc in known if loc.section))
    if sections:
        parts.append("; ".join(f"\u00a7{s}" for s in sections[:3]) + (" ..." if len(sections) > 3 else ""))
    return " ".join(parts[:2]) + "".join(f", {p}" for p in parts[2:])


def _ranges(numbers: list[int]) -> str:
    """``[3, 12, 13, 14]`` -> ``3, 12–14``."""
    out, start, prev = [], numbers[0], numbers[0]
    for n in [*numbers[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        out.append(str(start) if start == prev else f"{start}\u2013{prev}")
        if n is not None:
            start = prev = n
    return ", ".join(out)

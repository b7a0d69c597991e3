"""Ports for the servers tests start on loopback."""

from __future__ import annotations

import random
import socket


def free_port(below: int | None = None) -> int:
    """A port nothing listens on, on any interface (FalkorDB's Bolt listener
    binds them all): the kernel's pick, or a random free one below ``below``
    (FalkorDB reads its Bolt port as a signed 16-bit number, and the kernel
    picks above 32767 on Linux)."""
    for _ in range(1000):
        with socket.socket() as s:
            try:
                s.bind(("", random.randrange(10000, below) if below else 0))
            except OSError:
                continue
            return s.getsockname()[1]
    raise RuntimeError(f"no free port below {below}")

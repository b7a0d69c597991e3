"""The test Bolt server takes connections from this host only: every socket
listening on its port is bound to a loopback address (``scripts/bolt-server``
preloads ``loopback_bind.c``, as FalkorDB's listener has no bind option)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit


def _listening(port: int) -> list[ipaddress.IPv4Address | ipaddress.IPv6Address]:
    """Local addresses of the sockets listening on ``port`` (/proc/net/tcp{,6})."""
    found = []
    for table, width in (("/proc/net/tcp", 4), ("/proc/net/tcp6", 16)):
        with open(table) as fh:
            next(fh)
            for line in fh:
                local, state = line.split()[1], line.split()[3]
                address, hex_port = local.split(":")
                if state != "0A" or int(hex_port, 16) != port:  # 0A: LISTEN
                    continue
                raw = bytes.fromhex(address)
                # /proc prints each 32-bit word in host (little-endian) order
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
                found.append(ipaddress.ip_address(words if width == 16 else words))
    return found


def _loopback(address) -> bool:
    mapped = getattr(address, "ipv4_mapped", None)
    return (mapped or address).is_loopback


def test_the_bolt_port_listens_on_loopback_only(neo4j_options):
    port = urlsplit(neo4j_options["uri"]).port
    addresses = _listening(port)
    assert addresses, f"nothing listens on the Bolt port {port}"
    assert all(_loopback(a) for a in addresses), f"the Bolt port {port} listens on {addresses}"

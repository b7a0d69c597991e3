"""A real Ray cluster on this machine, for the Ray executor's tests and
benchmark: a head and worker nodes started with ``ray start`` (one CPU each
unless told), not Ray's local mode.

Every port is picked free (Ray's fixed defaults would collide with another
run's cluster), the cluster lives in a temporary folder of its own, and it is
stopped by killing its own processes, never by ``ray stop`` (which would stop
every Ray cluster of this machine's user). The head notices a dead node
within about 3 s (health checks every 0.5 s, 5 missed) instead of Ray's 30.
Needs ``psutil`` (the test extra).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from ragkit.testing.ports import free_port

RAY = Path(sys.executable).with_name("ray")
HEALTH = {"health_check_period_ms": 500, "health_check_failure_threshold": 5, "health_check_timeout_ms": 500}


def _ports() -> list[str]:
    return [
        "--dashboard-agent-listen-port", str(free_port()), "--dashboard-agent-grpc-port", str(free_port()),
        "--runtime-env-agent-port", str(free_port()), "--metrics-export-port", str(free_port()),
    ]


@dataclass
class Node:
    processes: list[psutil.Process]

    def kill(self) -> None:
        """SIGKILL the node's processes and their children: the node leaves the cluster."""
        victims = {p.pid: p for proc in self.processes for p in _tree(proc)}
        for p in victims.values():
            try:
                p.send_signal(signal.SIGKILL)
            except psutil.Error:
                pass

    def pids(self) -> set[int]:
        return {p.pid for proc in self.processes for p in _tree(proc)}


@dataclass
class RayCluster:
    root: Path
    address: str = ""
    nodes: list[Node] = field(default_factory=list)

    def _start(self, *args: str) -> tuple[Node, str]:
        before = set(self._ours())
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0"}
        proc = subprocess.run([str(RAY), "start", "--num-cpus", "1", "--disable-usage-stats", *_ports(), *args],
                              capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 0, f"ray start failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        node = Node([p for pid, p in self._ours().items() if pid not in before])
        self.nodes.append(node)
        return node, proc.stdout + proc.stderr

    def start_head(self) -> None:
        node, out = self._start(
            "--head", "--port", str(free_port()), "--ray-client-server-port", str(free_port()),
            "--include-dashboard=false", "--temp-dir", str(self.root), "--system-config", json.dumps(HEALTH),
        )
        self.address = _address_in(out)

    def add_node(self) -> Node:
        node, _ = self._start("--address", self.address)
        return node

    def _ours(self) -> dict[int, psutil.Process]:
        """The processes of this cluster (their command line names its folder)."""
        out = {}
        for p in psutil.process_iter(["cmdline"]):
            cmdline = p.info.get("cmdline") or []
            if any(str(self.root) in part for part in cmdline):
                out[p.pid] = p
        return out

    def stop(self) -> None:
        for node in reversed(self.nodes):
            node.kill()
        for p in self._ours().values():
            for q in _tree(p):
                try:
                    q.send_signal(signal.SIGKILL)
                except psutil.Error:
                    pass

    def model_worker_pids(self) -> set[int]:
        """Processes of ragkit's model actors (Ray names them after the class)."""
        out = set()
        for p in psutil.process_iter(["cmdline"]):
            cmdline = " ".join(p.info.get("cmdline") or [])
            if cmdline.startswith("ray::_ModelWorker"):
                out.add(p.pid)
        return out


def _tree(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return [proc, *proc.children(recursive=True)]
    except psutil.Error:
        return [proc]


def _address_in(output: str) -> str:
    for line in output.splitlines():
        if "ray start --address='" in line:
            return line.split("--address='", 1)[1].split("'", 1)[0]
    raise AssertionError(f"no cluster address in ray start's output:\n{output[-3000:]}")


def wait_for_nodes(address: str, count: int, timeout: float = 60) -> None:
    code = (
        "import ray, sys, time\n"
        f"ray.init(address={address!r}, logging_level='ERROR', log_to_driver=False)\n"
        "deadline = time.time() + float(sys.argv[2])\n"
        "while sum(n['Alive'] for n in ray.nodes()) < int(sys.argv[1]):\n"
        "    assert time.time() < deadline, ray.nodes()\n"
        "    time.sleep(0.2)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(count), str(timeout)], capture_output=True, text=True,
                          timeout=timeout + 30)
    assert proc.returncode == 0, proc.stderr[-3000:]


@contextmanager
def local_cluster(nodes: int = 2) -> Iterator[RayCluster]:
    """A head and ``nodes - 1`` worker nodes, stopped at the end."""
    assert RAY.exists(), f"{RAY} is missing: install the ray extra (pip install 'ragkit[ray]')"
    # Short: Ray's socket paths inside it must stay under 108 bytes.
    root = Path(tempfile.mkdtemp(prefix="rk-ray-", dir="/tmp"))
    cluster = RayCluster(root)
    try:
        cluster.start_head()
        for _ in range(nodes - 1):
            cluster.add_node()
        wait_for_nodes(cluster.address, nodes)
        yield cluster
    finally:
        cluster.stop()
        time.sleep(0.5)
        shutil.rmtree(root, ignore_errors=True)

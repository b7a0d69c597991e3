"""``ragkit index --executor ray`` on a real local cluster (conftest: a head
and a worker node): the same stores as an in-process run, the LLM limit held
across the cluster, and the faults a cluster has (a worker process killed,
the driver killed, a node leaving), each ending with the stores of an
uninterrupted in-process run and no cached answer asked for again. The LLM
is the replay model with a latency, built on the workers from the settings.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections import Counter

from ray_runs import (
    PASSAGES, calls, env, extraction_keys, index_cmd, most_at_once, run, same_stores, snapshot, wait_for_calls,
    write_settings,
)

from ragkit.testing.ray_cluster import local_cluster


def test_a_ray_run_gives_the_stores_of_an_in_process_run(tmp_path, ray_cluster, corpus, reference):
    log = tmp_path / "calls.log"
    config = write_settings(tmp_path / "ragkit.toml", tmp_path / "data", log, latency=0.05, concurrency=4)
    report = run(index_cmd(config, corpus, "--executor", "ray", "--address", ray_cluster.address))
    assert report["processed"] == PASSAGES and report["failed"] == {}
    same_stores(snapshot(tmp_path / "data"), reference)
    # The calls ran in the model actors, one on each node, not in the driver.
    pids = Counter(pid for event, pid, *_ in calls(log) if event == "end")
    assert len(pids) == 2 and min(pids.values()) >= PASSAGES // 4, pids
    # And a second run finds everything done: no call at all.
    again = run(index_cmd(config, corpus, "--executor", "ray", "--address", ray_cluster.address))
    assert again["skipped_unchanged"] == PASSAGES and again["llm"]["calls"] == {}


def test_the_llm_limit_holds_across_the_cluster(tmp_path, ray_cluster, corpus):
    """Two nodes, two model actors: still ``llm_concurrency`` calls at most."""
    log = tmp_path / "calls.log"
    config = write_settings(tmp_path / "ragkit.toml", tmp_path / "data", log, latency=0.1, concurrency=3)
    run(index_cmd(config, corpus, "--executor", "ray", "--address", ray_cluster.address))
    assert most_at_once(log) == 3
    assert len({pid for _, pid, *_ in calls(log)}) == 2


def test_a_killed_worker_process_is_retried_and_nothing_cached_is_asked_again(tmp_path, ray_cluster, corpus,
                                                                              reference):
    log = tmp_path / "calls.log"
    config = write_settings(tmp_path / "ragkit.toml", tmp_path / "data", log, latency=0.2, concurrency=4)
    driver = subprocess.Popen(index_cmd(config, corpus, "--executor", "ray", "--address", ray_cluster.address),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    wait_for_calls(log, 12, driver)
    victim = next(pid for event, pid, *_ in reversed(calls(log)) if event == "start")
    assert victim in ray_cluster.model_worker_pids()
    os.kill(victim, signal.SIGKILL)
    killed_at = len(calls(log))
    out, err = driver.communicate(timeout=240)
    assert driver.returncode == 0, err[-4000:]
    report = json.loads(out)
    assert report["processed"] == PASSAGES and report["failed"] == {}
    same_stores(snapshot(tmp_path / "data"), reference)
    # The calls the killed process had not finished ran again in another;
    # a call made twice had its first answer lost with the killed process
    # (never cached): every other call was made once.
    lines = calls(log)
    assert victim not in {pid for _, pid, *_ in lines[killed_at:]}
    ends: dict[str, list[int]] = {}
    for event, pid, role, key in lines:
        if event == "end" and role == "extraction":
            ends.setdefault(key, []).append(pid)
    assert set(ends) == extraction_keys(reference)
    twice = {key: pids for key, pids in ends.items() if len(pids) > 1}
    assert all(len(pids) == 2 and pids[0] == victim for pids in twice.values()), twice


def test_a_killed_driver_resumes_like_an_in_process_run(tmp_path, ray_cluster, corpus, reference):
    log = tmp_path / "calls.log"
    config = write_settings(tmp_path / "ragkit.toml", tmp_path / "data", log, latency=0.2, concurrency=4)
    cmd = index_cmd(config, corpus, "--executor", "ray", "--address", ray_cluster.address)
    driver = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
    wait_for_calls(log, 16, driver)
    driver.send_signal(signal.SIGKILL)
    driver.communicate(timeout=30)
    before = snapshot(tmp_path / "data")
    cached = extraction_keys(before)
    assert 0 < len(cached) < PASSAGES
    asked_before = len(calls(log))

    report = run(cmd)
    assert report["failed"] == {} and report["status"].get("processed") == PASSAGES
    same_stores(snapshot(tmp_path / "data"), reference)
    redone = [key for event, _, role, key in calls(log)[asked_before:] if event == "start" and role == "extraction"]
    assert not set(redone) & cached, "the resumed run asked again for answers cached before the kill"
    assert len(redone) == len(set(redone)) == PASSAGES - len(cached)


def test_a_node_that_leaves_mid_run_the_run_finishes_on_the_others(tmp_path, corpus, reference):
    """On a cluster of its own (a head and two nodes): a node whose model
    actor is answering is killed whole mid-run."""
    with local_cluster(nodes=3) as cluster:
        log = tmp_path / "calls.log"
        config = write_settings(tmp_path / "ragkit.toml", tmp_path / "data", log, latency=0.3, concurrency=6)
        cmd = index_cmd(config, corpus, "--executor", "ray", "--address", cluster.address)
        driver = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env())
        wait_for_calls(log, 6, driver)
        answering = {pid for _, pid, *_ in calls(log)}
        node = next((n for n in cluster.nodes[1:] if n.pids() & answering), None)
        assert node is not None, "no model actor answered from a worker node"
        node_pids = node.pids()
        node.kill()
        killed_at = len(calls(log))
        out, err = driver.communicate(timeout=240)
    assert driver.returncode == 0, err[-4000:]
    assert json.loads(out)["failed"] == {}
    same_stores(snapshot(tmp_path / "data"), reference)
    after_kill = {pid for event, pid, *_ in calls(log)[killed_at:] if event == "end"}
    assert after_kill and not after_kill & node_pids

"""The Ray executor from the Python API and its settings, its loaders on the
cluster, and its errors (on the cluster of conftest)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ragkit.errors import ConfigError
from ragkit.executors.ray_cluster import RayExecutor
from ragkit.pipeline.load import load_documents
from ragkit.rag import RAG
from ragkit.sections.index import IndexConfig, RayConfig
from ragkit.settings import Settings
from ragkit.testing.documents import corrupt, write_docx, write_pdf
from ragkit.testing.replay import ReplayLLM

from ray_runs import PASSAGES, env, same_stores, snapshot

RAGKIT = Path(sys.executable).with_name("ragkit")


def page(n: int) -> list[tuple[str, str]]:
    return [("h1", f"Chapter {n}"), ("p", f"Depot {n} ships spare parts to the northern line every week.")]


def test_files_read_on_the_cluster_give_the_local_load_report(tmp_path, ray_cluster):
    """Loaders run as tasks; the report (documents, items, order, duplicates,
    failures) is the one an in-process load gives."""
    folder = tmp_path / "in"
    folder.mkdir()
    write_pdf(folder / "a.pdf", [page(1), page(2)])
    write_docx(folder / "b.docx", [page(3)])
    corrupt(write_pdf(folder / "c.pdf", [page(4)]))
    (folder / "d.txt").write_text("Plain notes about depot 5.", encoding="utf-8")
    (folder / "e.pdf").write_bytes((folder / "a.pdf").read_bytes())  # a duplicate of a.pdf
    executor = RayExecutor(RayConfig(address=ray_cluster.address), {}, 2)
    try:
        remote = load_documents([folder], submit=executor.loader_submit())
    finally:
        executor.close()
    local = load_documents([folder])
    assert [d.model_dump() for d in remote.documents] == [d.model_dump() for d in local.documents]
    assert remote.items == local.items
    assert [i.outcome for i in local.items] == ["loaded", "loaded", "failed", "loaded", "skipped"]


def test_executors_share_the_connection_and_the_last_one_closes_it(tmp_path, ray_cluster):
    """A server's workspaces each have an executor: one closing must not cut
    the others off the cluster."""
    import ray

    write_pdf(tmp_path / "a.pdf", [page(1)])
    first, second = (RayExecutor(RayConfig(address=ray_cluster.address), {}, 2) for _ in range(2))
    first.loader_submit()
    submit = second.loader_submit()
    first.close()
    assert ray.is_initialized()
    assert [i.outcome for i in load_documents([tmp_path / "a.pdf"], submit=submit).items] == ["loaded"]
    second.close()
    assert not ray.is_initialized()


def test_the_python_api_with_a_model_instance(tmp_path, ray_cluster, corpus, reference):
    """``RAG(settings, llm=instance)`` with ``[index] executor = "ray"``: the
    instance travels to the model actors, which make every call."""
    index = IndexConfig(executor="ray", ray=RayConfig(address=ray_cluster.address), llm_concurrency=4)
    settings = Settings(working_dir=tmp_path / "data", index=index, embedder={"name": "hash"})
    llm = ReplayLLM()
    with RAG(settings, llm=llm) as rag:
        result = rag.insert(paths=[corpus])
    assert len(result.report.processed) == PASSAGES and result.report.failed == {}
    assert result.report.llm["calls"]["extraction"] == PASSAGES
    assert llm.calls == 0  # this process's instance answered nothing
    same_stores(snapshot(tmp_path / "data"), reference)


def test_an_address_where_no_cluster_answers_fails_at_once_naming_the_fix():
    executor = RayExecutor(RayConfig(address="127.0.0.1:9"), {}, 2)
    with pytest.raises(ConfigError, match=r"no Ray cluster answers at 127.0.0.1:9 .*ray start --head"):
        executor.loader_submit()


def test_address_without_the_ray_executor_is_a_usage_error(tmp_path):
    (tmp_path / "a.txt").write_text("x", encoding="utf-8")
    proc = subprocess.run([str(RAGKIT), "index", str(tmp_path / "a.txt"), "--address", "127.0.0.1:9"],
                          capture_output=True, text=True, env={**env(), "RAGKIT_WORKING_DIR": str(tmp_path / "d")},
                          timeout=60)
    assert proc.returncode == 2 and "--address names a Ray cluster: use it with --executor ray" in proc.stderr

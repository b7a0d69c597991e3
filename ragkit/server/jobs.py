"""Background ingestion: one writer task per workspace draining its queue.

An upload is saved under the workspace (``<working_dir>/<ws>/server/uploads/<job>/``)
and its job record written (``.../server/jobs/<job>.json``) *before* the
request is answered, so a job once accepted survives a crash: on start,
``resume`` queues every job not finished, and ``RAG.ainsert`` first recovers
the documents the crash left ``pending`` or ``processing`` (the doc-status
machinery). Deletes and graph edits go through the same queue (``run_write``),
so a workspace has one writer in this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from ragkit.access import AccessList
from ragkit.pipeline.load_isolated import load_documents_isolated
from ragkit.rag import RAG
from ragkit.redact import redact
from ragkit.server.pool import WorkspacePool

log = logging.getLogger(__name__)
State = Literal["queued", "running", "done", "failed"]
TERMINAL = ("done", "failed")


class JobInput(BaseModel):
    file: str
    """The saved file's name in the job's upload folder."""
    name: str | None = None
    """The document's path as the user named it (a text has none)."""


class Job(BaseModel):
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    workspace: str
    state: State = "queued"
    inputs: list[JobInput] = Field(default_factory=list)
    access: dict[str, list[str]] | None = None
    owner: str | None = None
    """The id of the key that submitted it: only that key (or an admin) sees it,
    as it names files and documents other principals may not read."""
    created: float = Field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    documents: int = 0
    documents_done: int = 0
    chunks: int = 0
    llm_calls: int = 0
    tokens: int = 0
    processed: list[str] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    failed: dict[str, str] = Field(default_factory=dict)
    error: str | None = None

    def view(self) -> dict[str, Any]:
        """The job as the API shows it: progress, elapsed, ETA."""
        data = self.model_dump(exclude={"inputs", "owner"})
        end = self.finished or time.time()
        elapsed = end - self.started if self.started else 0.0
        left = self.documents - self.documents_done
        eta = None
        if self.state == "running" and self.documents_done and left > 0:
            eta = elapsed / self.documents_done * left
        return {**data, "files": [i.name for i in self.inputs], "elapsed": round(elapsed, 3),
                "eta": None if eta is None else round(eta, 3)}


def server_dir(working_dir: Path, workspace: str) -> Path:
    return Path(working_dir) / workspace / "server"


class JobManager:
    def __init__(self, working_dir: Path, pool: WorkspacePool) -> None:
        self.working_dir = Path(working_dir)
        self.pool = pool
        self.jobs: dict[str, Job] = {}
        self._queues: dict[str, asyncio.Queue] = {}
        self._writers: dict[str, asyncio.Task] = {}

    # -- accepting -------------------------------------------------------------

    def upload_dir(self, job: Job) -> Path:
        return server_dir(self.working_dir, job.workspace) / "uploads" / job.id

    def _record(self, job: Job) -> Path:
        return server_dir(self.working_dir, job.workspace) / "jobs" / f"{job.id}.json"

    def save(self, job: Job) -> None:
        path = self._record(job)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(job.model_dump_json())
        with open(tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(tmp, path)  # a crash leaves the old record or the new one, never half of one

    def submit(self, job: Job) -> Job:
        """Persist the job (its files are already saved) and queue it."""
        job.documents = len(job.inputs)
        self.save(job)
        self.jobs[job.id] = job
        self._enqueue(job.workspace, job)
        return job

    def get(self, workspace: str, job_id: str) -> Job | None:
        job = self.jobs.get(job_id)
        if job is not None:
            return job if job.workspace == workspace else None
        if not job_id.isalnum():
            return None
        path = server_dir(self.working_dir, workspace) / "jobs" / f"{job_id}.json"
        return Job.model_validate_json(path.read_text()) if path.is_file() else None  # another worker's

    def queue_depth(self) -> dict[str, int]:
        return {ws: q.qsize() + (ws in self._writers) for ws, q in self._queues.items()}

    async def run_write(self, workspace: str, work: Callable[[RAG], Awaitable[Any]]) -> Any:
        """Run a write (delete, graph edit) in the workspace's writer, and wait for it."""
        done: asyncio.Future = asyncio.get_running_loop().create_future()
        self._enqueue(workspace, (work, done))
        return await done

    def resume(self) -> list[Job]:
        """Queue every job a previous run accepted and did not finish."""
        found = []
        for record in sorted(self.working_dir.glob("*/server/jobs/*.json")):
            with contextlib.suppress(ValueError, OSError):
                job = Job.model_validate_json(record.read_text())
                if job.state not in TERMINAL:
                    found.append(job)
        for job in sorted(found, key=lambda j: j.created):
            job.state = "queued"
            self.jobs[job.id] = job
            self._enqueue(job.workspace, job)
        return found

    # -- the writer ----------------------------------------------------------------

    def _enqueue(self, workspace: str, item: Any) -> None:
        self._queues.setdefault(workspace, asyncio.Queue()).put_nowait(item)
        if workspace not in self._writers:
            self._writers[workspace] = asyncio.create_task(self._drain(workspace))

    async def _drain(self, workspace: str) -> None:
        queue = self._queues[workspace]
        try:
            while not queue.empty():
                item = queue.get_nowait()
                async with self.pool.lease(workspace, wait=True) as rag:  # a queued job waits for room
                    if isinstance(item, Job):
                        await self._ingest(rag, item)
                    else:
                        await _write(rag, *item)
        finally:
            del self._writers[workspace]
            if not queue.empty():  # queued while this task was finishing
                self._writers[workspace] = asyncio.create_task(self._drain(workspace))

    async def _ingest(self, rag: RAG, job: Job) -> None:
        job.state, job.started = "running", time.time()
        self.save(job)
        stats = rag.llm.stats
        calls0 = sum(stats.calls.values())
        tokens0 = sum(stats.input_tokens.values()) + sum(stats.output_tokens.values())
        last_save = [time.monotonic()]

        def progress(event: str, n: int) -> None:
            if event == "chunks_extracted":
                job.chunks += n
            elif event == "documents_committed":
                job.documents_done += n
            job.llm_calls = sum(stats.calls.values()) - calls0
            job.tokens = sum(stats.input_tokens.values()) + sum(stats.output_tokens.values()) - tokens0
            if time.monotonic() - last_save[0] > 1:  # other workers read progress from the record
                last_save[0] = time.monotonic()
                self.save(job)

        rag.progress = progress
        try:
            docs = await self._documents(job)
            kwargs = {"access": _access(job.access)} if job.access else {}
            _, report = await rag.ainsert(documents=docs, **kwargs)
            job.processed, job.skipped, job.failed = report.processed, report.skipped, {**job.failed, **report.failed}
            job.documents_done = len(report.processed) + len(report.skipped) + len(report.failed)
            job.state = "done"
        except Exception as exc:
            log.warning("job %s failed: %s", job.id, redact(f"{type(exc).__name__}: {exc}"))
            job.state, job.error = "failed", redact(f"{type(exc).__name__}: {exc}", exc=exc)
        finally:
            rag.progress = None
            progress("", 0)
            job.finished = time.time()
            self.save(job)
        shutil.rmtree(self.upload_dir(job), ignore_errors=True)  # the content is in the stores now

    async def _documents(self, job: Job) -> list:
        folder = self.upload_dir(job)
        settings = self.pool.settings
        # Off the event loop, each loader in a child process: a file that exhausts
        # memory or hangs fails alone, and /health and queries keep answering.
        loaded = await asyncio.to_thread(
            load_documents_isolated, [folder / i.file for i in job.inputs], limits=settings.loaders,
            memory_bytes=settings.server.loader_memory_bytes, timeout_s=settings.server.loader_timeout)
        by_path = {str(folder / i.file): i.name for i in job.inputs}
        docs = [d.model_copy(update={"file_path": by_path.get(d.file_path or "")}) for d in loaded.documents]
        # A file its loader refused (over a bound, damaged) is named, not dropped.
        job.failed.update({by_path.get(i.path) or Path(i.path).name: i.message
                           for i in loaded.items if i.outcome == "failed"})
        job.documents = len(docs)
        return docs

    async def close(self) -> None:
        for task in list(self._writers.values()):
            task.cancel()
        await asyncio.gather(*self._writers.values(), return_exceptions=True)


async def _write(rag: RAG, work: Callable[[RAG], Awaitable[Any]], done: asyncio.Future) -> None:
    try:
        result = await work(rag)
    except Exception as exc:
        if not done.done():
            done.set_exception(exc)
    else:
        if not done.done():
            done.set_result(result)


def _access(access: dict[str, list[str]]) -> AccessList:
    return AccessList(users=access.get("users") or [], groups=access.get("groups") or [])


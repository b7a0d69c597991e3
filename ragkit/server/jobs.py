"""Background ingestion: one writer task per workspace draining its queue.

An upload is saved under the workspace (``<working_dir>/<ws>/server/uploads/<job>/``)
and its job record written (``.../server/jobs/<job>.json``) *before* the
request is answered, so a job once accepted survives a crash: on start,
``resume`` queues every job not finished, and ``RAG.ainsert`` first recovers
the documents the crash left ``pending`` or ``processing`` (the doc-status
machinery). Deletes and graph edits go through the same queue (``run_write``),
so a workspace has one writer in this process.

A job's errors (``error``, ``failed``) are what its client may read
(``public_message``: a model's cause, not its server's URL or words); the whole
errors go to the server log.
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

from ragkit.access import AccessList, Principal
from ragkit.core.files import private_dir
from ragkit.core.llm_cache import LLMStats, counting
from ragkit.errors import public_message
from ragkit.pipeline.identity import SOURCE_PATH
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
    """The id of the key that submitted it: only that key sees the job whole,
    as it names files and documents other principals may not read (an admin
    key sees the others' progress, ``view(full=False)``)."""
    principal: Principal | None = None
    """Who the documents are written as (``RAG.ainsert(principal=)``); none in keyless mode."""
    attempts: int = 0
    """Runs started; a job interrupted ``[server] job_attempts`` times fails instead of running again."""
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

    def view(self, full: bool = True) -> dict[str, Any]:
        """The job as the API shows it: progress, elapsed, ETA. Not ``full``
        (an admin key's view of another key's job): state and counts only, no
        file names, document ids, messages or access list."""
        data = self.model_dump(exclude={"inputs", "owner", "principal"})
        if not full:
            data = {k: v for k, v in data.items() if k not in _PRIVATE}
        end = self.finished or time.time()
        elapsed = end - self.started if self.started else 0.0
        left = self.documents - self.documents_done
        eta = None
        if self.state == "running" and self.documents_done and left > 0:
            eta = elapsed / self.documents_done * left
        files = {"files": [i.name for i in self.inputs]} if full else {}
        return {**data, **files, "elapsed": round(elapsed, 3), "eta": None if eta is None else round(eta, 3)}


_PRIVATE = frozenset({"access", "processed", "skipped", "failed", "error"})


def server_dir(working_dir: Path, workspace: str) -> Path:
    return Path(working_dir) / workspace / "server"


class JobManager:
    def __init__(self, working_dir: Path, pool: WorkspacePool) -> None:
        self.working_dir = Path(working_dir)
        self.pool = pool
        self.max_attempts = pool.settings.server.job_attempts
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
        private_dir(path.parent)
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
        """Queue every job a previous run accepted and did not finish, unless
        it was started ``[server] job_attempts`` times already: a file that
        crashes or exhausts the server would otherwise do it again at every
        start. Returns the jobs queued."""
        found = []
        for record in sorted(self.working_dir.glob("*/server/jobs/*.json")):
            with contextlib.suppress(ValueError, OSError):
                job = Job.model_validate_json(record.read_text())
                if job.state not in TERMINAL:
                    found.append(job)
        queued = []
        for job in sorted(found, key=lambda j: j.created):
            if job.attempts >= self.max_attempts:
                self._give_up(job)
                continue
            job.state = "queued"
            self.jobs[job.id] = job
            self._enqueue(job.workspace, job)
            queued.append(job)
        return queued

    def _give_up(self, job: Job) -> None:
        log.error("job %s was interrupted %d times; it is marked failed and not run again", job.id, job.attempts)
        job.state, job.finished = "failed", time.time()
        job.error = (
            f"the server stopped while running this job {job.attempts} times (a file may crash or exhaust "
            "it); it is not run again. Fix: check the server log, then submit the files again, one at a time "
            "to find the one at fault ([server] job_attempts sets the number of tries)"
        )
        self.jobs[job.id] = job
        self.save(job)
        shutil.rmtree(self.upload_dir(job), ignore_errors=True)

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
        # Counted afresh at every attempt (a resumed job redoes its documents,
        # skipping what is done), and the attempt saved before any file is read.
        job.state, job.started, job.attempts = "running", time.time(), job.attempts + 1
        job.documents_done = job.chunks = job.llm_calls = job.tokens = 0
        job.processed, job.skipped, job.failed, job.error = [], [], {}, None
        self.save(job)
        usage = LLMStats()
        last_save = [time.monotonic()]

        def progress(event: str, n: int) -> None:
            if event == "chunks_extracted":
                job.chunks += n
            elif event == "documents_committed":
                job.documents_done = min(job.documents, job.documents_done + n)
            job.llm_calls, job.tokens = _own(usage)
            if time.monotonic() - last_save[0] > 1:  # other workers read progress from the record
                last_save[0] = time.monotonic()
                self.save(job)

        rag.progress = progress
        try:
            docs, unreadable = await self._documents(job)
            kwargs: dict[str, Any] = {"access": _access(job.access)} if job.access else {}
            if job.principal is not None:
                kwargs["principal"] = job.principal
            with counting(usage):
                _, report = await rag.ainsert(documents=docs, **kwargs)
            job.processed, job.skipped = report.processed, report.skipped
            job.failed = {**unreadable, **report.failed}
            job.documents_done = len(report.processed) + len(report.skipped) + len(job.failed)
            # Like the CLI's exit status 1: a job none of whose files could be read failed.
            job.state = "failed" if unreadable and not docs else "done"
            if job.state == "failed":
                job.error = "no file could be read; `failed` says why for each"
            for doc_id, detail in report.failed_details.items():
                log.warning("job %s: document %s failed: %s", job.id, doc_id, detail)
        except Exception as exc:
            log.warning("job %s failed: %s", job.id, redact(f"{type(exc).__name__}: {exc}", exc=exc))
            job.state, job.error = "failed", public_message(exc)
        finally:
            rag.progress = None
            progress("", 0)
            job.finished = time.time()
            self.save(job)
        shutil.rmtree(self.upload_dir(job), ignore_errors=True)  # the content is in the stores now

    async def _documents(self, job: Job) -> tuple[list, dict[str, str]]:
        """The job's documents under the names the client gave, and the files
        that could not be read: name -> why (the CLI's per-file report)."""
        folder = self.upload_dir(job)
        settings = self.pool.settings
        # Off the event loop, each loader in a child process: a file that exhausts
        # memory or hangs fails alone, and /health and queries keep answering.
        loaded = await asyncio.to_thread(
            load_documents_isolated, [folder / i.file for i in job.inputs], limits=settings.loaders,
            memory_bytes=settings.server.loader_memory_bytes, timeout_s=settings.server.loader_timeout)
        by_path = {str(folder / i.file): i.name for i in job.inputs}
        # The saved copy's path is neither the client's file nor stable: the
        # client's name is the document's path and its key (``identity``).
        docs = [
            d.model_copy(update={
                "file_path": by_path.get(d.file_path or ""),
                "metadata": {k: v for k, v in d.metadata.items() if k != SOURCE_PATH},
            })
            for d in loaded.documents
        ]
        shown = {str(folder / i.file): i.name or f"texts[{n}]" for n, i in enumerate(job.inputs)}
        unreadable = {
            # The saved copy's path is the server's business: the client's name instead.
            shown.get(item.path, item.path): item.message.replace(item.path, shown.get(item.path, item.path))
            for item in loaded.items if item.outcome == "failed" or _empty(item)
        }
        job.documents = len(docs) + len(unreadable)
        return docs, unreadable

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


def _empty(item) -> bool:
    """A file with no text: the CLI skips it, as there is nothing to index; an
    upload of one is a mistake to report (a duplicate, skipped too, is not)."""
    return item.outcome == "skipped" and item.message.startswith("empty")


def _own(usage: LLMStats) -> tuple[int, int]:
    """The extraction requests of the job's documents (answered by the model
    or from the cache) and their tokens: they depend on the job's own text
    alone (a principal's answers are cached in its own space). Summaries are
    left out: they merge other documents' descriptions too."""
    role = "extraction"
    return usage.calls[role] + usage.cache_hits[role], usage.input_tokens[role] + usage.output_tokens[role]


def _access(access: dict[str, list[str]]) -> AccessList:
    return AccessList(users=access.get("users") or [], groups=access.get("groups") or [])


"""What every process of a fault trial runs: the ``ragkit`` CLI, or a graph
edit (``edit_op.py``), in a process forked from a server that imported ragkit
and loaded its plugins once (``multiprocessing``'s forkserver, with this
module preloaded).

Each is a real process of its own, killed and stopped by real signals, with
its own environment, working directory and stdout/stderr files; only the
seconds of importing are shared. That cuts a trial's cost from a few
seconds per process (on a loaded 2-core machine) to a fraction, so 100 trials
take minutes.
"""

from __future__ import annotations

import contextlib
import faulthandler
import importlib
import os
import signal
import sys

import ragkit.cli.docs_cmd  # noqa: F401  (imported once, in the forkserver)
import ragkit.cli.index_cmd  # noqa: F401
import ragkit.cli.query_cmd  # noqa: F401
import ragkit.rag  # noqa: F401
from ragkit.cli.main import main as ragkit_main
from ragkit.plugins import get_registry
from ragkit.tokenizer import _encoding

get_registry()  # every adapter imported, before any fork
_encoding("cl100k_base")  # the default tokenizer's tables: seconds per process to load
# The servers' clients, and the embedder's: the trials embed through the
# ``openai`` client, whose import alone took over 120 s in a child of a loaded
# machine (CI seed 7101 "hung" in it).
for _client in ("chromadb", "ragkit_chroma.store", "neo4j", "redis.asyncio", "openai", "ragkit_openai.embeddings",
                "asyncpg", "ragkit_postgres.kv", "ragkit_postgres.doc_status", "ragkit_postgres.vector",
                "ragkit_postgres.graph", "ragkit_postgres.lease"):
    with contextlib.suppress(ImportError):
        importlib.import_module(_client)


def run(argv: list[str], env: dict[str, str], cwd: str, out: str, err: str) -> None:
    os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    if limit := env.get("FAULTS_FSIZE_LIMIT"):  # a full disk where no tmpfs could be mounted
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (int(limit), int(limit)))
    for fd, path in ((1, out), (2, err)):
        f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(f, fd)
        os.close(f)
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # the campaign's "where is it stuck?"
    code = 1
    try:
        if argv[0] == "ragkit":
            code = ragkit_main(argv[1:])
        else:
            from .edit_op import main as edit_main

            code = edit_main(argv[1])
    except BaseException:  # an uncaught error: what an interpreter prints, then exit 1
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code or 0)

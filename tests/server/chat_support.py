"""A real chat server for the chat endpoint tests: the Ollama and OpenAI
routers in a FastAPI app, served by uvicorn on a free loopback port, over a
RAG indexed from examples/corpus/en (and one secret document) with the offline LLM and the hash embedder.

The app's context dependency stands in for the server's authentication: a
request without ``Authorization: Bearer <TOKEN>`` gets a 401, so the tests
can prove that every chat route depends on it. The routers are mounted twice,
under a workspace prefix (``/w/{workspace}``) and at the root, to prove that
they work under any prefix.
"""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import uvicorn
from fastapi import FastAPI, Header, HTTPException

from ragkit.access import AccessList, Principal
from ragkit.errors import ModelError
from ragkit.offline import OfflineLLM
from ragkit.protocols import ChatRequest
from ragkit.rag import RAG
from ragkit.schema import Document
from ragkit.server.chat import ChatLimits, ollama_router, openai_router
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder

TOKEN = "chat-test-token-1234"
"""Alice's key: she may read everything but the secret document."""
CEO_TOKEN = "chat-test-ceo-token-5678"
"""The CEO's key: the secret document too."""
PRINCIPALS = {TOKEN: Principal(user="alice", groups=["staff"]), CEO_TOKEN: Principal(user="ceo")}
SECRET_DOC = Document.from_text(
    "Project Orchid is led by Wen Li. Project Orchid carries the code CANARY-PLUM-4417.",
    file_path="secret/orchid.md",
).model_copy(update={"access": AccessList(users=["ceo"])})
CANARIES = ("CANARY-PLUM-4417", "Wen Li", "secret/orchid.md", SECRET_DOC.id)
"""What only the secret document holds (its text, path, id)."""
CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus" / "en"
QUESTION = "Who leads the project whose supplier's delivery slipped?"
LIMITS = ChatLimits(max_messages=20, max_message_chars=4000, max_total_chars=20_000)


FAIL = "FAIL-THE-MODEL"
SECRET = "sk-chat-test-secret-0123456789"


class RecordingLLM(OfflineLLM):
    """The offline LLM, recording every answer request; a question containing
    ``FAIL`` fails like a model server's 500 whose message carries a key."""

    def __init__(self) -> None:
        super().__init__()
        self.answers: list[ChatRequest] = []

    def respond(self, request: ChatRequest) -> str:
        if request.role == "answer":
            self.answers.append(request)
            if FAIL in request.prompt:
                raise ModelError(f"model server answered 500 for api_key={SECRET}")
        return super().respond(request)


def make_rag(working_dir: Path, llm: OfflineLLM | None = None) -> RAG:
    return RAG(Settings(working_dir=working_dir), llm=llm or OfflineLLM(), embedder=HashEmbedder({"dimension": 256}))


@dataclass
class Ctx:
    rag: RAG
    principal: Principal | None


@dataclass
class ChatServer:
    """The running app: ``url`` is the root, ``workspace_url`` the prefixed mount."""

    url: str
    llm: RecordingLLM
    seen: list[str] = field(default_factory=list)
    """The workspace of every request the context dependency let through."""

    @property
    def workspace_url(self) -> str:
        return f"{self.url}/w/demo"


def build_app(rag: RAG, seen: list[str]) -> FastAPI:
    async def context(workspace: str = "default", authorization: str | None = Header(default=None)) -> Ctx:
        scheme, _, key = (authorization or "").partition(" ")
        if scheme != "Bearer" or key not in PRINCIPALS:
            raise HTTPException(401, "missing or wrong API key: send it as a Bearer token",
                                headers={"WWW-Authenticate": "Bearer"})
        seen.append(workspace)
        return Ctx(rag, PRINCIPALS[key])

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        yield
        await rag.aclose()

    app = FastAPI(lifespan=lifespan)
    for prefix in ("/w/{workspace}", ""):
        app.include_router(ollama_router(context, LIMITS), prefix=prefix)
        app.include_router(openai_router(context, LIMITS), prefix=prefix)
    return app


def index_corpus(working_dir: Path) -> None:
    async def build() -> None:
        async with make_rag(working_dir) as rag:
            _, report = await rag.ainsert(paths=[CORPUS], documents=[SECRET_DOC])
            assert not report.failed and len(report.processed) == len(list(CORPUS.iterdir())) + 1, report

    asyncio.run(build())


@pytest.fixture(scope="module")
def chat_server(tmp_path_factory) -> Iterator[ChatServer]:
    """uvicorn in a thread, serving until the module's tests are done."""
    working_dir = tmp_path_factory.mktemp("chat-index")
    index_corpus(working_dir)
    seen: list[str] = []
    llm = RecordingLLM()
    server = uvicorn.Server(uvicorn.Config(build_app(make_rag(working_dir, llm), seen), log_level="warning"))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    host, port = sock.getsockname()
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the chat server did not start"
        time.sleep(0.02)
    try:
        yield ChatServer(url=f"http://{host}:{port}", llm=llm, seen=seen)
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()
        assert not thread.is_alive(), "the chat server did not stop"

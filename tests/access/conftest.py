"""An access-control corpus: canary facts only unreadable documents hold.

Three documents, extracted by a scripted LLM so that the graph is known exactly:

- ``PUBLIC`` (no list): Harbor City and its council;
- ``TEAM`` (group ``falcon``): Project Falcon, led by Dana Reyes, based in Harbor City;
- ``SECRET`` (user ``mallory``, group ``exec``): Project Falcon merges with
  Zephyr Dynamics (an entity only it mentions), based in Harbor City too, and
  the canary code. Project Falcon's and Harbor City's descriptions merge
  readable and unreadable sources, and their degrees count an unreadable edge.

The answer LLM echoes its whole prompt, so any canary in a context reaches the
answer too. An oracle index holds only what a principal may read: what the
principal's reads show must agree with it.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from ragkit.access import AccessList, Principal
from ragkit.rag import RAG
from ragkit.schema import Document
from ragkit.sections.index import IndexConfig
from ragkit.settings import Settings
from ragkit.testing import HashEmbedder, ScriptedLLM

CANARIES = ("CANARY-ORCHID-7731", "Zephyr", "zephyr", "merger-plan", "secret/merger.txt")
"""Strings only the secret document (its text, entities, path) holds."""

PUBLIC = Document.from_text(
    "Harbor City is a port town. The Harbor Council governs Harbor City.", file_path="public/harbor.txt",
    kind="public",
)
TEAM = Document.from_text(
    "Project Falcon is led by Dana Reyes. Project Falcon is based in Harbor City.",
    file_path="team/falcon.txt", kind="team",
).model_copy(update={"access": AccessList(groups=["falcon"])})
SECRET = Document.from_text(
    "Project Falcon will merge with Zephyr Dynamics, code CANARY-ORCHID-7731. "
    "Zephyr Dynamics is based in Harbor City.",
    file_path="secret/merger.txt", kind="secret",
).model_copy(update={"access": AccessList(users=["mallory"], groups=["exec"])})
DOCS = (PUBLIC, TEAM, SECRET)

EXTRACTIONS = {
    "Harbor City is a port town": (
        "entity<|#|>Harbor City<|#|>location<|#|>Harbor City is a port town.\n"
        "entity<|#|>Harbor Council<|#|>organization<|#|>The Harbor Council governs Harbor City.\n"
        "relation<|#|>Harbor Council<|#|>Harbor City<|#|>governance<|#|>The council governs the town.\n"
    ),
    "Project Falcon is led by": (
        "entity<|#|>Project Falcon<|#|>project<|#|>Project Falcon is a project led by Dana Reyes.\n"
        "entity<|#|>Dana Reyes<|#|>person<|#|>Dana Reyes leads Project Falcon.\n"
        "entity<|#|>Harbor City<|#|>location<|#|>Harbor City hosts Project Falcon.\n"
        "relation<|#|>Dana Reyes<|#|>Project Falcon<|#|>leadership<|#|>Dana Reyes leads Project Falcon.\n"
        "relation<|#|>Project Falcon<|#|>Harbor City<|#|>location<|#|>Project Falcon is based in Harbor City.\n"
    ),
    "Project Falcon will merge": (
        "entity<|#|>Project Falcon<|#|>project<|#|>Project Falcon merges with Zephyr Dynamics under "
        "merger-plan CANARY-ORCHID-7731.\n"
        "entity<|#|>Zephyr Dynamics<|#|>organization<|#|>Zephyr Dynamics acquires Project Falcon, "
        "code CANARY-ORCHID-7731.\n"
        "entity<|#|>Harbor City<|#|>location<|#|>Harbor City hosts Zephyr Dynamics, see CANARY-ORCHID-7731.\n"
        "relation<|#|>Project Falcon<|#|>Zephyr Dynamics<|#|>merger-plan<|#|>Project Falcon merges with "
        "Zephyr Dynamics, CANARY-ORCHID-7731.\n"
        "relation<|#|>Zephyr Dynamics<|#|>Harbor City<|#|>location<|#|>Zephyr Dynamics is based in Harbor City.\n"
    ),
}

KEYWORDS = (
    '{"high_level_keywords": ["project leadership", "merger-plan", "location"], '
    '"low_level_keywords": ["Project Falcon", "Harbor City", "Zephyr Dynamics"]}'
)


def script(request) -> str:
    if request.role == "extraction":
        rows = next((rows for needle, rows in EXTRACTIONS.items() if needle in request.prompt), "")
        return rows + "<|COMPLETE|>"
    if request.role == "keywords":
        return KEYWORDS
    # The answer: an echo of everything the model was shown.
    return f"ECHO {request.system or ''}\n{request.prompt}"


ALICE = Principal(user="alice", groups=frozenset({"falcon"}))
"""Reads PUBLIC and TEAM."""
BOB = Principal(user="bob")
"""Reads PUBLIC only."""
MALLORY = Principal(user="mallory")
"""Reads PUBLIC and SECRET."""
READERS = {"alice": (ALICE, (PUBLIC, TEAM)), "bob": (BOB, (PUBLIC,))}
"""The principals that may not read SECRET, and what they may read."""


def make_rag(folder: Path, llm: ScriptedLLM | None = None) -> RAG:
    return RAG(
        Settings(working_dir=folder),
        llm=llm or ScriptedLLM(script=script),
        embedder=HashEmbedder({"dimension": 128}),
        index=IndexConfig(llm_concurrency=2),
    )


async def abuild(folder: Path, docs) -> Path:
    async with make_rag(folder) as rag:
        _, report = await rag.ainsert(documents=list(docs))
        assert not report.failed and len(report.processed) == len(docs)
    return folder


def build(folder: Path, docs) -> Path:
    return asyncio.run(abuild(folder, docs))


@pytest.fixture(scope="session")
def acl_index(tmp_path_factory) -> Path:
    return build(tmp_path_factory.mktemp("acl-index"), DOCS)


@pytest.fixture(scope="session")
def oracles(tmp_path_factory) -> dict[str, Path]:
    """For each reader, an index of only the documents it may read (no lists)."""
    return {
        name: build(tmp_path_factory.mktemp(f"acl-oracle-{name}"),
                    [d.model_copy(update={"access": None}) for d in docs])
        for name, (_, docs) in READERS.items()
    }


@pytest.fixture
def acl_workdir(acl_index, tmp_path) -> Path:
    """A private copy, for tests that write (the answer cache)."""
    target = tmp_path / "acl"
    shutil.copytree(acl_index, target)
    return target


def assert_clean(text: str, where: str = "") -> None:
    for canary in CANARIES:
        assert canary not in text, f"{canary!r} leaked{' in ' + where if where else ''}: {text[:2000]}"

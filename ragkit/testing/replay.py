"""A replay LLM: answers extraction prompts with the recorded MuSiQue extractions.

The data set (``../shared/data/musique``, see its README) holds 1,890 passages
and what gpt-3.5-turbo extracted from each. ``ReplayLLM`` lets the whole indexing
pipeline run on that real model output with no network and no model.

How a prompt is answered:

- An extraction prompt (``ragkit.core.prompts``) carries the chunk between
  marker lines. The chunk is looked up as a passage's ``passage`` text (title,
  newline, text), then with whitespace runs collapsed on both sides, and the
  passage's record is rendered whole (``canonical_extraction``).
- A chunk that is only part of a passage (a document split into several chunks)
  gets the first passage, in file order, that contains it, rendered with only
  the triples whose subject and object both occur in the chunk and the entities
  that occur in it (case-insensitive, whitespace collapsed). Recorded strings the
  passage paraphrases are then lost; a whole-passage chunk loses nothing.
- A gleaning prompt gets ``<|COMPLETE|>``: the recording has one pass only.
- A keywords prompt gets the data set's keyword rule applied to its question
  (``ragkit.testing.musique_keywords``); an answer prompt gets an extractive
  answer: the first sentence of the best-matching context chunk, cited.
- Anything else (including a chunk no passage contains) gets ``<|COMPLETE|>``
  and is counted in ``unknown_prompts``.

Canonical rendering (the data set README, followed exactly): entities are the
union of ``extracted_entities`` and every well-formed triple's subject and object,
exact strings, in that order, type ``entity``. An entity's description is the
sentences ``"{subject} {relation} {object}."`` of the triples whose subject or
object is exactly that entity, in triple order, joined by spaces (a triple listed
twice is said twice); an entity in no triple gets ``"{name} is mentioned in the
passage about {title}."``. Each well-formed triple (exactly three strings) gives
one relation: subject -> object, keywords = the relation phrase, description =
its sentence, strength 1.0. Malformed triples give nothing.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from ragkit.core.prompts import COMPLETE_MARKER, chunk_text_of, is_gleaning_request, render_rows
from ragkit.errors import ConfigError
from ragkit.ids import digest
from ragkit.protocols.base import Capability
from ragkit.protocols.models import ChatRequest, Completion, ModelAdapter, Usage
from ragkit.schema import Entity, Relation
from ragkit.testing.doubles import words
from ragkit.testing.musique_keywords import EntityNames, question_keywords

ENV_VAR = "RAGKIT_MUSIQUE_DIR"
OPENIE_FILE = "openie_gpt-3.5-turbo-1106.json"
CORPUS_FILE = "corpus.json"
QUESTIONS_FILE = "questions_dev.json"
_REPO_ROOT = Path(__file__).resolve().parents[2]


class CorpusPassage(TypedDict):
    title: str
    text: str


class OpenIEDoc(TypedDict):
    title: str
    text: str
    passage: str
    extracted_entities: list[str]
    extracted_triples: list[list[Any]]
    """Mostly ``[subject, relation, object]``; some recorded triples are malformed."""


class Question(TypedDict):
    id: str
    question: str
    answer: str
    answer_aliases: list[str]
    question_decomposition: list[dict[str, Any]]
    paragraphs: list[dict[str, Any]]
    answerable: bool


def musique_dir() -> Path:
    """The MuSiQue data folder: ``$RAGKIT_MUSIQUE_DIR``, else ``shared/data/musique``
    in the repository's parent folder (or any folder above it or above the
    working directory). Raises ``ConfigError`` naming the variable when missing."""
    env = os.environ.get(ENV_VAR)
    if env:
        folder = Path(env).expanduser()
        if (folder / OPENIE_FILE).is_file():
            return folder
        raise ConfigError(f"{ENV_VAR}={env!r} has no {OPENIE_FILE}: point {ENV_VAR} at the MuSiQue data folder")
    tried: list[Path] = []
    for base in (_REPO_ROOT, Path.cwd().resolve()):
        for folder in (base, *base.parents):
            candidate = folder / "shared" / "data" / "musique"
            if candidate in tried:
                continue
            if (candidate / OPENIE_FILE).is_file():
                return candidate
            tried.append(candidate)
    raise ConfigError(
        f"MuSiQue data not found (no {OPENIE_FILE} in {', '.join(map(str, tried[:3]))}, ...): "
        f"set {ENV_VAR} to the folder holding {CORPUS_FILE}, {OPENIE_FILE} and {QUESTIONS_FILE}"
    )


def load_musique(
    directory: Path | str | None = None,
) -> tuple[list[CorpusPassage], list[OpenIEDoc], list[Question]]:
    """(corpus passages, recorded extractions, dev questions) from the data folder."""
    folder = Path(directory) if directory is not None else musique_dir()

    def read(name: str) -> Any:
        try:
            return json.loads((folder / name).read_text(encoding="utf-8"))
        except OSError as exc:
            raise ConfigError(
                f"cannot read {folder / name}: {exc}; set {ENV_VAR} to the MuSiQue data folder"
            ) from exc

    return read(CORPUS_FILE), read(OPENIE_FILE)["docs"], read(QUESTIONS_FILE)


def well_formed(triple: Any) -> bool:
    return isinstance(triple, list) and len(triple) == 3 and all(isinstance(x, str) for x in triple)


def canonical_extraction(doc: OpenIEDoc, chunk: str | None = None) -> tuple[list[Entity], list[Relation]]:
    """The passage's record as entities and relations; with ``chunk``, only what
    occurs in that fragment of the passage (see the module docstring)."""
    triples: list[list[str]] = [t for t in doc["extracted_triples"] if well_formed(t)]
    mentioned = [e for e in doc["extracted_entities"] if isinstance(e, str)]
    names = list(dict.fromkeys([*mentioned, *(x for s, _, o in triples for x in (s, o))]))
    if chunk is not None:
        haystack = _squash(chunk).casefold()

        def occurs(text: str) -> bool:
            return _squash(text).casefold() in haystack

        triples = [t for t in triples if occurs(t[0]) and occurs(t[2])]
        names = [n for n in names if occurs(n)]
    sentences = [f"{s} {r} {o}." for s, r, o in triples]
    entities = []
    for name in names:
        about = [line for line, (s, _, o) in zip(sentences, triples) if name in (s, o)]
        description = " ".join(about) or f"{name} is mentioned in the passage about {doc['title']}."
        entities.append(Entity(name=name, type="entity", description=description))
    relations = [
        Relation(source=s, target=o, keywords=r, description=line, strength=1.0)
        for line, (s, r, o) in zip(sentences, triples)
    ]
    return entities, relations


def _squash(text: str) -> str:
    return " ".join(text.split())


class _Recording:
    """The recorded docs, indexed by passage text."""

    def __init__(self, docs: list[OpenIEDoc], fingerprint: str) -> None:
        self.docs = docs
        self.fingerprint = fingerprint
        self.by_passage = {d["passage"]: d for d in docs}
        self.by_squashed = {_squash(d["passage"]): d for d in docs}
        self._names: EntityNames | None = None

    def entity_names(self) -> EntityNames:
        if self._names is None:
            self._names = EntityNames(e.name for d in self.docs for e in canonical_extraction(d)[0])
        return self._names

    def find(self, chunk: str) -> tuple[OpenIEDoc, bool] | None:
        """(passage, whether the chunk is the whole passage), or None."""
        if chunk in self.by_passage:
            return self.by_passage[chunk], True
        squashed = _squash(chunk)
        if not squashed:
            return None
        if squashed in self.by_squashed:
            return self.by_squashed[squashed], True
        for text, doc in self.by_squashed.items():
            if squashed in text:
                return doc, False
        return None


@functools.lru_cache(maxsize=4)
def _recording(path: Path) -> _Recording:
    # Cached: tests build many replay models over the same 3 MB file.
    try:
        raw = path.read_bytes()
        docs = json.loads(raw)["docs"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"cannot read the recorded extractions {path}: {exc}") from exc
    return _Recording(docs, digest(raw.decode("utf-8", "replace"))[:12])


class ReplayLLMOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: Path | None = None
    """The recorded extractions file, or its folder; default: ``musique_dir()``."""
    latency: float = Field(default=0.0, ge=0)
    """Seconds each call sleeps, to simulate a remote model."""
    jitter: float = Field(default=0.0, ge=0)
    """Up to this many extra seconds, derived from the prompt so runs repeat exactly."""
    chunk_size: int = Field(default=64, ge=1)
    """Characters per streamed piece."""
    call_log: Path | None = None
    """A file each call appends to (``start`` and ``end`` lines with the
    process id, the role, the request's LLM cache key and the time): what the processes of a Ray
    run asked, for tests that kill them (tests/ray)."""


class ReplayLLM(ModelAdapter):
    """Answers extraction prompts from the MuSiQue recording (see the module docstring).

    Counters: ``calls`` (every call), ``gleanings``, ``unknown_prompts``.
    """

    name = "replay"
    Options = ReplayLLMOptions
    capabilities = frozenset({Capability.STREAMING, Capability.DETERMINISTIC})

    def __init__(self, options: Any = None) -> None:
        super().__init__(options)
        path = self.options.path or musique_dir()
        if path.is_dir():
            path = path / OPENIE_FILE
        if not path.is_file():
            raise ConfigError(f"recorded extractions not found at {path}: set path, or {ENV_VAR}")
        self.recording = _recording(path.resolve())
        self.model_id = f"replay:{self.recording.fingerprint}"
        self.calls = 0
        self.gleanings = 0
        self.unknown_prompts = 0
        self.summaries = 0
        self.alias_checks = 0

    def answer(self, request: ChatRequest) -> str:
        self.calls += 1
        chunk = chunk_text_of(request.prompt)
        if chunk is not None:
            found = self.recording.find(chunk)
            if found is not None:
                doc, whole = found
                return render_rows(*canonical_extraction(doc, None if whole else chunk))
        elif is_gleaning_request(request):
            self.gleanings += 1
            return COMPLETE_MARKER
        elif request.role == "keywords":
            return self._keywords(request)
        elif request.role == "answer":
            return extractive_answer(request)
        elif request.role == "summary":
            # Nothing was recorded for summaries: answer extractively (the
            # statements themselves), which is deterministic and invents nothing.
            self.summaries += 1
            # Every "- " line after the header: a statement may itself say
            # "Description:", so the footer is not searched for.
            statements = request.prompt.partition("\nStatements:\n")[2]
            return " ".join(
                line[2:].strip() for line in statements.splitlines() if line.startswith("- ")
            )
        elif request.role == "aliases":
            # Nothing was recorded for the alias check: it links nothing (the
            # calls are still made and counted, what their cost is measured by).
            self.alias_checks += 1
            return '{"same": []}'
        self.unknown_prompts += 1
        return COMPLETE_MARKER

    def _log(self, event: str, request: ChatRequest) -> None:
        if self.options.call_log is not None:
            # One write of a short line with O_APPEND: lines of processes do not interleave.
            line = f"{event} {os.getpid()} {request.role} {request.cache_key(self.model_id)} {time.time():.6f}\n"
            with open(self.options.call_log, "a", encoding="utf-8") as log:
                log.write(line)

    def _keywords(self, request: ChatRequest) -> str:
        """The data set's keyword rule, applied to the question in the prompt."""
        question = request.prompt.rpartition("Question:")[2].strip()
        high, low = question_keywords(question, self.recording.entity_names())
        return json.dumps({"high_level_keywords": high, "low_level_keywords": low})

    def delay(self, request: ChatRequest) -> float:
        """Seconds ``complete`` sleeps for ``request``: ``latency`` plus a share
        of ``jitter`` taken from the prompt's digest (the same every run)."""
        share = int(digest(request.prompt)[:8], 16) / 0xFFFFFFFF
        return self.options.latency + self.options.jitter * share

    async def complete(self, request: ChatRequest) -> Completion:
        delay = self.delay(request)
        self._log("start", request)
        if delay:
            await asyncio.sleep(delay)
        text = self.answer(request)
        self._log("end", request)
        return Completion(
            text=text,
            usage=Usage(input_tokens=len(words(request.prompt)), output_tokens=len(words(text))),
        )

    async def stream(self, request: ChatRequest) -> AsyncIterator[str]:
        text = (await self.complete(request)).text
        step = self.options.chunk_size
        for i in range(0, len(text), step):
            yield text[i : i + step]


def extractive_answer(request: ChatRequest) -> str:
    """No answers were recorded: the context chunk sharing most words with the
    question, its first sentence, cited. Deterministic and invents nothing."""
    question = set(words(request.prompt))
    best: tuple[int, int, str] | None = None
    for line in (request.system or "").splitlines():
        if not line.startswith('{"ref"'):
            continue
        try:
            row = json.loads(line)
        except ValueError:
            continue
        overlap = len(question & set(words(row.get("content", ""))))
        if best is None or overlap > best[0]:
            best = (overlap, int(row.get("ref", 0)), str(row.get("content", "")))
    if best is None:
        return "The context holds nothing to answer from."
    first = best[2].replace("\n", " ").split(". ")[0].rstrip(".")
    return f"{first}. [{best[1]}]"

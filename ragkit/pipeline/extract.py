"""Extraction stage: one chunk in, its entities and relations out.

The model's output is untrusted: ``parse_extraction`` never raises, and what it
drops is counted. Every relation endpoint is made an entity of the same chunk,
so an edge's sources are always a subset of its endpoints' sources (which is
what lets delete remove nodes and edges by sources alone).

An answer is parsed and checked before it is cached (``CachedLLM.complete_checked``):
one that has no readable extraction, or whose extraction no store could keep
(``ragkit.core.text``), fails its chunk and is not cached, so it can never
fail a later run.
"""

from __future__ import annotations

from ragkit.core.extraction import ChunkExtraction
from ragkit.core.keys import entity_key
from ragkit.core.llm_cache import CachedLLM
from ragkit.core.prompts import build_extraction_request, build_gleaning_request
from ragkit.core.text import record_problem
from ragkit.errors import ExtractionError
from ragkit.pipeline.parse import ParsedExtraction, parse_extraction
from ragkit.schema import Chunk, Entity, Relation
from ragkit.sections.index import ExtractConfig


async def extract_chunk(
    chunk: Chunk, llm: CachedLLM, config: ExtractConfig, cache_space: str | None = None
) -> ChunkExtraction:
    """``cache_space``: answers are cached apart for it (``pipeline/identity.py``)."""
    kwargs = {"language": config.language}
    if config.entity_types is not None:
        kwargs["entity_types"] = config.entity_types
    request = build_extraction_request(chunk.content, **kwargs)
    answer, first = await llm.complete_checked(
        request, lambda text: _checked(chunk.id, text, first=True), scope=cache_space
    )
    parsed = [first]
    for _ in range(config.gleaning):
        request = build_gleaning_request(request, answer)
        answer, more = await llm.complete_checked(request, lambda text: _checked(chunk.id, text), scope=cache_space)
        parsed.append(more)
    return combine_extractions(chunk.id, parsed)


def _checked(chunk_id: str, answer: str, *, first: bool = False) -> tuple[str, ParsedExtraction]:
    """The answer and its extraction, or ``ExtractionError`` (and nothing cached)
    when the first answer is unreadable or any answer holds what no store keeps."""
    parsed = parse_extraction(answer)
    if first and _unreadable(parsed):
        detail = parsed.warnings[0] if parsed.warnings else "empty answer"
        raise ExtractionError(
            f"chunk {chunk_id}: the model's answer has no readable extraction ({detail}); "
            "it was not cached, so the document is retried on the next run",
            public=f"chunk {chunk_id}: the model's answer has no readable extraction; "
            "the document is retried on the next run",
        )
    # The parser makes every field storable; this is the check that it did.
    problem = record_problem(parsed.model_dump(mode="json", include={"entities", "relations"}), "extraction")
    if problem:
        raise ExtractionError(
            f"chunk {chunk_id}: the model's answer cannot be stored ({problem}); "
            "it was not cached, so the document is retried on the next run",
            public=f"chunk {chunk_id}: the model's answer cannot be stored; the document is retried on the next run",
        )
    return answer, parsed


def _unreadable(parsed) -> bool:
    """Nothing usable and no end marker: garbage, a cut-off or an empty answer.
    A bare <|COMPLETE|> is a valid "nothing here" and is not an error."""
    return not parsed.entities and not parsed.relations and not parsed.complete


def combine_extractions(chunk_id: str, parsed: list) -> ChunkExtraction:
    entities: dict[str, Entity] = {}
    relations: dict[tuple[str, str], Relation] = {}
    dropped, warnings = 0, []
    for result in parsed:
        dropped += result.dropped
        warnings += result.warnings
        for ent in result.entities:
            key = entity_key(ent.name)
            if not key:
                continue
            old = entities.get(key)
            entities[key] = ent.model_copy(
                update={
                    "source_ids": [chunk_id],
                    # Several statements about one entity in one chunk all count.
                    "description": _join(old.description, ent.description) if old else ent.description,
                    "type": old.type if old else ent.type,
                    "name": old.name if old else ent.name,
                }
            )
        for rel in result.relations:
            a, b = entity_key(rel.source), entity_key(rel.target)
            if not a or not b or a == b:
                continue
            pair = (a, b) if a <= b else (b, a)
            old = relations.get(pair)
            if old is None:
                relations[pair] = rel.model_copy(update={"source_ids": [chunk_id]})
            else:
                relations[pair] = old.model_copy(
                    update={
                        "keywords": ", ".join(dict.fromkeys(
                            k.strip() for k in f"{old.keywords},{rel.keywords}".split(",") if k.strip()
                        )),
                        "description": _join(old.description, rel.description),
                        "strength": old.strength + rel.strength,
                    }
                )
    for rel in relations.values():
        for name in (rel.source, rel.target):
            entities.setdefault(
                entity_key(name), Entity(name=name.strip(), source_ids=[chunk_id])
            )
    return ChunkExtraction(
        chunk_id=chunk_id,
        entities=list(entities.values()),
        relations=list(relations.values()),
        dropped=dropped,
        warnings=warnings,
    )


def _join(a: str, b: str) -> str:
    lines = [line for line in (a, b) if line.strip()]
    return "\n".join(dict.fromkeys(lines))

"""Cost before spending: what ``insert`` would send to the LLM, without sending it.

Every first-pass extraction prompt is built exactly as ``extract_chunk`` builds
it, so chunks, calls and input tokens are exact (counted with the configured
tokenizer over system prompt, history and prompt; a provider's few tokens of
chat framing per message are not included). Two things cannot be known before
the model answers, and are estimated and labelled as such: output tokens, and
gleaning calls (their prompts carry the previous answer). Summary calls depend
on what the extraction finds and are not included.

Documents already processed and prompts already in the LLM cache cost nothing
and are reported separately.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from ragkit.core.prompts import GLEANING_PROMPT, build_extraction_request
from ragkit.core.stores import Stores
from ragkit.core.tokens import request_tokens
from ragkit.pipeline.chunk import get_chunker
from ragkit.pipeline.index import IndexConfig
from ragkit.pipeline.windows import iter_chunks
from ragkit.protocols import ChatRequest, Tokenizer
from ragkit.schema import DocStatus, Document

DEFAULT_OUTPUT_RATIO = 1.0
"""Output tokens per chunk token when the cache holds no answers to calibrate on."""


class DryRunReport(BaseModel):
    documents: int = 0
    skipped_unchanged: int = 0
    chunks: int = 0
    llm_calls: int = 0
    """First-pass extraction calls that would be made (not cached)."""
    cached_calls: int = 0
    input_tokens: int = 0
    """Exact, for the calls in ``llm_calls``."""
    gleaning_calls: int = 0
    gleaning_input_tokens_estimate: int = 0
    output_tokens_estimate: int = 0
    output_ratio: float = DEFAULT_OUTPUT_RATIO
    output_ratio_source: str = "default"
    per_document: dict[str, dict[str, int]] = Field(default_factory=dict)


async def dry_run(
    documents: Sequence[Document],
    tokenizer: Tokenizer,
    config: IndexConfig,
    *,
    stores: Stores | None = None,
    model_id: str | None = None,
) -> DryRunReport:
    """``stores`` (opened) and ``model_id`` let it skip processed documents and cached prompts."""
    chunker = get_chunker(config.chunker, tokenizer, config.chunk_size, config.chunk_overlap)
    kwargs: dict = {"language": config.extract.language}
    if config.extract.entity_types is not None:
        kwargs["entity_types"] = config.extract.entity_types
    report = DryRunReport()
    unique = list({d.id: d for d in documents}.values())
    processed = await _processed(stores, [d.id for d in unique])
    report.output_ratio, report.output_ratio_source = await _output_ratio(stores, tokenizer, model_id, kwargs)
    for doc in unique:
        if doc.id in processed:
            report.skipped_unchanged += 1
            continue
        report.documents += 1
        row = {"chunks": 0, "llm_calls": 0, "input_tokens": 0}
        for chunk in iter_chunks(chunker, doc):  # as the indexer chunks it (large texts in segments)
            request = build_extraction_request(chunk.content, **kwargs)
            row["chunks"] += 1
            if await _cached(stores, model_id, request):
                report.cached_calls += 1
                continue
            tokens = request_tokens(tokenizer, request)
            answer = round(chunk.tokens * report.output_ratio)
            row["llm_calls"] += 1
            row["input_tokens"] += tokens
            report.output_tokens_estimate += answer
            glean_tokens = tokens + answer + tokenizer.count(GLEANING_PROMPT)
            for _ in range(config.extract.gleaning):
                report.gleaning_calls += 1
                report.gleaning_input_tokens_estimate += glean_tokens
                glean_tokens += answer // 4  # assumes a gleaning pass finds a quarter as much
            report.output_tokens_estimate += config.extract.gleaning * (answer // 4)
        report.chunks += row["chunks"]
        report.llm_calls += row["llm_calls"]
        report.input_tokens += row["input_tokens"]
        report.per_document[doc.id] = row
    return report


async def _processed(stores: Stores | None, doc_ids: list[str]) -> set[str]:
    if stores is None or not doc_ids:
        return set()
    records = await stores.doc_status.get(doc_ids)
    return {r.id for r in records if r is not None and r.status is DocStatus.PROCESSED}


async def _cached(stores: Stores | None, model_id: str | None, request: ChatRequest) -> bool:
    if stores is None or model_id is None:
        return False
    return await stores.llm_cache.get(request.cache_key(model_id)) is not None


async def _output_ratio(
    stores: Stores | None, tokenizer: Tokenizer, model_id: str | None, kwargs: dict, sample: int = 100
) -> tuple[float, str]:
    """Calibrate output tokens per chunk token on this model's cached answers
    for chunks already indexed (their prompts are rebuilt to find them)."""
    if stores is None or model_id is None:
        return DEFAULT_OUTPUT_RATIO, "default"
    chunk_ids = []
    async for chunk_id in stores.chunks.keys():
        chunk_ids.append(chunk_id)
        if len(chunk_ids) >= sample:
            break
    chunk_tokens = answer_tokens = seen = 0
    for chunk in await stores.chunks.get_many(chunk_ids):
        if chunk is None:
            continue
        request = build_extraction_request(chunk["content"], **kwargs)
        cached = await stores.llm_cache.get(request.cache_key(model_id))
        if cached is not None:
            chunk_tokens += chunk["tokens"]
            answer_tokens += tokenizer.count(cached["text"])
            seen += 1
    if not seen or not chunk_tokens:
        return DEFAULT_OUTPUT_RATIO, "default"
    return answer_tokens / chunk_tokens, f"measured on {seen} cached answers of this model"

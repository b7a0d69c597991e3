"""Typed settings of the write side: the ``[index]`` section of ``ragkit.toml``,
with its ``extract`` and ``merge`` parts and the chunk window rule.

Environment: ``RAGKIT_INDEX__CHUNK_SIZE=800``, ``RAGKIT_INDEX__EXTRACT__GLEANING=1``.
The pipeline reads it (``chunk``, ``extract``, ``merge``, ``index``); this
module imports none of them, so loading settings loads no part of the index side.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragkit.errors import ConfigError

MIN_SIZE = 4
"""One character can take up to four byte-level tokens; smaller windows could not hold it."""


def check_window(size: int, overlap: int) -> None:
    if not isinstance(size, int) or size < MIN_SIZE:
        raise ConfigError(
            f"chunk size must be an integer of at least {MIN_SIZE} tokens, got {size!r} "
            "(one character can take up to 4 tokens)"
        )
    if not isinstance(overlap, int) or not 0 <= overlap < size:
        raise ConfigError(
            f"chunk overlap must be at least 0 and smaller than the chunk size: "
            f"got overlap={overlap!r} with size={size}"
        )


class ExtractConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    entity_types: list[str] | None = None
    """None: the prompt's default types."""
    language: str = "English"
    gleaning: int = Field(default=0, ge=0, le=3)
    """Extra "did you miss anything?" passes per chunk."""


class MergeConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    summary_min_fragments: int = Field(default=8, ge=2)
    """Summarise once an entity has this many distinct descriptions..."""
    summary_min_tokens: int = Field(default=1200, ge=1)
    """...or its joined descriptions are this long."""
    summary_context_tokens: int = Field(default=12000, ge=500)
    """Largest input of one summary call; longer inputs are map-reduced."""
    summary_max_output_tokens: int = Field(default=500, ge=50)
    defer_summaries: bool = True
    """Insert batches store the joined lines and an ``insert()`` summarises each
    entity once at its end (see ``ragkit.pipeline.summaries``), instead of one
    summary call per batch that adds a line to an entity over the threshold."""
    language: str = "English"



class RayConfig(BaseModel):
    """Where ``executor = "ray"`` sends the work (``ragkit.executors.ray_cluster``)."""

    model_config = ConfigDict(extra="forbid")

    address: str | None = None
    """The cluster's ``host:port`` (``ray start --head`` prints it), or ``auto``
    for the one started on this machine; ``None``: ``RAY_ADDRESS`` when set,
    else a Ray instance of this process's own (one machine)."""
    model_workers: int | None = Field(default=None, ge=1)
    """Model actors (each holds the LLM and embedder clients and serves
    ``llm_concurrency`` calls at most, cluster-wide); ``None``: one per node
    alive when the run starts."""


class IndexConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    executor: Literal["local", "ray"] = "local"
    """Where loading, chunking, LLM calls and embedding run: this process
    (``local``), or the tasks and actors of a Ray cluster (``ray``: the
    ``ragkit[ray]`` extra; ``ragkit.executors``). The merge and the store
    writes stay in this process, under the workspace's writer lock, either way."""
    ray: RayConfig = Field(default_factory=RayConfig)

    chunker: str = "token"
    chunk_size: int = Field(default=1200, ge=16)
    chunk_overlap: int = Field(default=100, ge=0)
    llm_concurrency: int = Field(default=8, ge=1)
    max_docs_in_flight: int = Field(default=32, ge=1)
    max_batch_docs: int = Field(default=64, ge=1)
    """Most documents committed in one batch."""
    window_chunks: int = Field(default=256, ge=1)
    """A document with more chunks is extracted, merged and committed this many
    chunks at a time (``ragkit.pipeline.windows``): memory stays bounded and a
    cut-short run resumes after the last committed window."""
    aliases: bool = True
    """Entity resolution: link entities whose names are variants of one name
    ("Rank Organisation" and "The Rank Organisation", "George W. Bush" and
    "George Bush"), for the ``ppr`` walk (``ragkit.core.alias_index``)."""
    alias_check: bool = False
    """Also ask the LLM about the pairs the name rules cannot decide (an
    acronym, one side's qualifier, a longer form): 16 pairs a call, role
    ``aliases`` (``ragkit.core.alias_check``). Off: those stay unlinked."""
    extract: ExtractConfig = Field(default_factory=ExtractConfig)
    merge: MergeConfig = Field(default_factory=MergeConfig)

    @model_validator(mode="after")
    def _window(self) -> IndexConfig:
        check_window(self.chunk_size, self.chunk_overlap)  # fail at configuration, not mid-run
        return self

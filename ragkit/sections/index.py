"""Typed settings of the write side: the ``[index]`` section of ``ragkit.toml``.

Environment: ``RAGKIT_INDEX__CHUNK_SIZE=800``, ``RAGKIT_INDEX__EXTRACT__GLEANING=1``.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ragkit.pipeline.chunk import check_window
from ragkit.pipeline.extract import ExtractConfig
from ragkit.pipeline.merge import MergeConfig


class IndexConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

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
    extract: ExtractConfig = Field(default_factory=ExtractConfig)
    merge: MergeConfig = Field(default_factory=MergeConfig)

    @model_validator(mode="after")
    def _window(self) -> IndexConfig:
        check_window(self.chunk_size, self.chunk_overlap)  # fail at configuration, not mid-run
        return self

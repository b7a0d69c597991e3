"""An example third-party ragkit plugin: one in-memory KV store and one query mode."""

from ragkit_example_plugin.keyword_chunks import KeywordChunks
from ragkit_example_plugin.memory_kv import MemoryKVOptions, MemoryKVStore

__all__ = ["KeywordChunks", "MemoryKVOptions", "MemoryKVStore"]
__version__ = "0.1.0"

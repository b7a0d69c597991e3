"""An example third-party ragkit plugin: one in-memory KV store."""

from ragkit_example_plugin.memory_kv import MemoryKVOptions, MemoryKVStore

__all__ = ["MemoryKVOptions", "MemoryKVStore"]
__version__ = "0.1.0"

"""The module named by the ``ragkit`` entry point.

Keep it cheap to import: ragkit imports every plugin module to list adapters
(``ragkit plugins``), so heavy imports (client libraries, connections) belong
inside the hook function or the adapter, never at module level here.
"""

from ragkit.plugins import hookimpl


@hookimpl
def register_kv_stores(register):
    from ragkit_example_plugin.memory_kv import MemoryKVStore

    register(MemoryKVStore)  # registered under MemoryKVStore.name, "example-memory"


@hookimpl
def register_query_modes(register):
    from ragkit_example_plugin.keyword_chunks import KeywordChunks

    register(KeywordChunks)  # ragkit query --mode keyword-chunks

"""What the index side (``ragkit.pipeline``) and the query side (``ragkit.query``)
share, so that neither imports the other (``tests/core/test_layers.py``):

- ``stores``: the stores of one workspace, opened and closed together;
- ``keys``: the graph keys of entities and relations;
- ``llm_cache``: LLM calls through a cache and a concurrency limit;
- ``tokens``: counting a request's tokens;
- ``prompts``: every prompt sent to a model (extraction, summary, keywords),
  which the offline LLM and replay models also read back;
- ``extraction``: what one chunk says (``ChunkExtraction``), one chunk's
  statement about an entity or relation (``Fragment``), and the pure merge of
  fragments into node and edge properties (no LLM: the index side adds
  summaries on top, the query side uses it as is to restrict a description to
  the documents in scope).

Nothing here loads ``ragkit.pipeline``, ``ragkit.query``, settings or the
wiring above them, even indirectly (``tests/core/test_layers.py``). This
package re-exports nothing: import from its modules.
"""

"""A query mode: the chunks nearest the question and each of its named things.

Dense retrieval with one query misses the passage about the second entity of a
question that names two ("Which supplier of Project Haijia also works for
Qinghe?"): the question's vector sits between them. Here every low-level
keyword searches the chunk index on its own, and the lists are interleaved
with the question's, best first; no graph is read, so it works on any index.
"""

from __future__ import annotations

from ragkit.query.modes import Found, QueryMode, round_robin


class KeywordChunks(QueryMode):
    name = "keyword-chunks"
    description = "chunks nearest the question and each named thing in it, interleaved (no graph)"

    def texts(self, question, keywords, param):
        return [question, *keywords.low_level]

    async def search(self, question, keywords, param, searcher):
        # searcher.chunks honours the query's scope (doc_ids, doc_filter) and
        # uses the vectors embedded from texts() above: no second embedder call.
        lists = [await searcher.chunks(text, param.chunk_top_k) for text in self.texts(question, keywords, param)]
        return Found(chunks=round_robin(*lists)[: param.chunk_top_k])

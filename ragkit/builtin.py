"""The embedded default adapters, registered through the public hooks."""

from ragkit.plugins.hookspecs import hookimpl


@hookimpl
def register_kv_stores(register):
    from ragkit.storage.sqlite_kv import SQLiteKVStore

    register(SQLiteKVStore)


@hookimpl
def register_doc_status_stores(register):
    from ragkit.storage.sqlite_doc_status import SQLiteDocStatusStore

    register(SQLiteDocStatusStore)


@hookimpl
def register_vector_stores(register):
    from ragkit.storage.numpy_vectors import NumpyVectorStore
    from ragkit.storage.usearch_vectors import USearchVectorStore

    register(NumpyVectorStore)
    register(USearchVectorStore)


@hookimpl
def register_graph_stores(register):
    from ragkit.storage.networkx_graph import NetworkXGraphStore
    from ragkit.storage.sqlite_graph import SQLiteGraphStore

    register(SQLiteGraphStore)
    register(NetworkXGraphStore)


@hookimpl
def register_chunkers(register):
    from ragkit.pipeline.chunk import MarkdownChunker, TokenChunker

    register(TokenChunker, "token")
    register(MarkdownChunker, "markdown")


@hookimpl
def register_tokenizers(register):
    from ragkit.tokenizer import TiktokenTokenizer

    register(TiktokenTokenizer)


@hookimpl
def register_llms(register):
    from ragkit.offline import OfflineLLM

    register(OfflineLLM)


@hookimpl
def register_embedders(register):
    from ragkit.offline.embedder import HashEmbedder

    register(HashEmbedder)


@hookimpl
def register_query_modes(register):
    from ragkit.query.modes import BUILTIN_MODES

    for mode in BUILTIN_MODES:
        register(mode)


@hookimpl
def register_loaders(register):
    # Modules only: each loader imports its library when it reads a file.
    from ragkit.loaders.html import EpubLoader, HtmlLoader
    from ragkit.loaders.office import DocxLoader, PptxLoader, XlsxLoader
    from ragkit.loaders.pdf import PdfLoader
    from ragkit.loaders.tabular import CsvLoader

    for loader in (PdfLoader, DocxLoader, PptxLoader, XlsxLoader, CsvLoader, HtmlLoader, EpubLoader):
        register(loader)

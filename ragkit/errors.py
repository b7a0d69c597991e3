"""Every error ragkit raises, in one place.

    RagkitError
    ├── ConfigError                 settings file or environment is wrong
    │   ├── AdapterNotFoundError    a backend name that no plugin registered
    │   └── DuplicateAdapterError   two plugins registered the same name
    ├── PluginLoadError             an entry point failed to import (strict mode)
    ├── StoreError                  a store refused an operation
    │   ├── StoreClosedError        used before open() or after close()
    │   ├── InvalidValueError       a record, property or metadata value the protocol forbids
    │   │   └── DimensionMismatchError   a vector of the wrong length
    │   └── InvalidTransitionError  a document status change the lifecycle forbids
    ├── ModelError                  an LLM, embedder or reranker call failed
    │   └── ExtractionError         the model's extraction answer cannot be read or stored
    ├── GraphEditError              a graph edit that cannot be applied as asked
    │   ├── ElementNotFoundError    the entity or relation to edit does not exist
    │   └── ElementExistsError      the entity or relation to create already exists
    ├── ExportError                 an export format or target ragkit cannot write
    ├── MigrateError                a migration ragkit refuses, or a copy that does not verify
    ├── WriterLockTimeoutError      another process kept the workspace's writer lock too long
    ├── WriterLeaseLostError        this process lost the writer lock mid-write (it stalled)
    ├── WriteAccessError            a principal's write that would hide its result from itself
    ├── DocumentNotFoundError       an id or path that names no stored document
    ├── WorkspaceNotFoundError      a listing command on a workspace nothing was ever written to
    └── InputNotFoundError          a file or folder given to insert(paths=...) that does not exist

Messages name the problem and the fix, because they reach users of the CLI.

What the HTTP API, and anyone who may read a workspace, is told is
``public_message(error)``: a ``ModelError`` carries a second, public text
(``error.public``: the cause in ragkit's words, without the model server's URL
or its own words, which may echo a credential or an internal address);
another ragkit error its message, redacted; any other exception only its type.
The whole message goes to the server log.
"""

from __future__ import annotations

import os


class RagkitError(Exception):
    """Base class of every error raised by ragkit."""


class ConfigError(RagkitError):
    """Settings are invalid or refer to something that is not installed."""


class AdapterNotFoundError(ConfigError):
    """A backend or model name that no installed plugin registered."""


class DuplicateAdapterError(ConfigError):
    """Two plugins registered an adapter of the same kind under one name."""


class PluginLoadError(RagkitError):
    """An entry point of the ``ragkit`` group failed to load."""


class StoreError(RagkitError):
    """A store refused an operation."""


class StoreClosedError(StoreError):
    """A store was used before ``open()`` or after ``close()``."""


class InvalidValueError(StoreError, ValueError):
    """A key, record, property or metadata value that the protocol does not allow."""


class DimensionMismatchError(InvalidValueError):
    """A vector whose length differs from the store's fixed dimension."""


class InvalidTransitionError(StoreError, ValueError):
    """A document status change that the lifecycle does not allow."""


class ModelError(RagkitError):
    """An LLM, embedder or reranker call failed.

    ``str(error)`` is the whole story for whoever runs ragkit: the service and
    its URL, what the server said (redacted), the fix. ``public`` is the cause
    alone, in ragkit's words ("the LLM server refused the credentials (HTTP
    401)"), for clients of the HTTP API. Without one, a client learns only that
    a model call failed.
    """

    def __init__(self, message: str, *, public: str | None = None) -> None:
        super().__init__(message)
        self.public = public or "a model call failed"


class ExtractionError(ModelError):
    """The model's extraction answer cannot be read or cannot be stored."""


class GraphEditError(RagkitError, ValueError):
    """A graph edit that cannot be applied as asked (e.g. merging fewer than two)."""


class WriteAccessError(RagkitError, ValueError):
    """A write made as a principal that the write rule refuses (``pipeline/identity.py``)."""


class ElementNotFoundError(GraphEditError, LookupError):
    """The entity or relation an edit names does not exist."""


class ElementExistsError(GraphEditError):
    """The entity or relation an edit would create already exists."""


class ExportError(RagkitError, ValueError):
    """An export format or target that ragkit cannot write."""


class MigrateError(RagkitError):
    """``ragkit migrate`` refused (non-empty target, other embedder, changed
    source, one store on both sides) or its copy did not verify."""


class WriterLockTimeoutError(RagkitError, TimeoutError):
    """Another process held the workspace's writer lock for longer than
    ``lock.timeout``; the message names the holder (pid, host, since)."""


class WriterLeaseLostError(RagkitError):
    """This process lost the workspace's writer lock while writing (it stalled
    for longer than ``lock.lease_ttl``, or its lock file was removed): the
    write was refused before it reached a store, and so is every later write
    of the same hold. What it left half done is redone by the next run's
    recovery."""


class DocumentNotFoundError(RagkitError, LookupError):
    """Ids or paths that name no stored document; ``arguments`` lists them."""

    def __init__(self, arguments: list[str]) -> None:
        self.arguments = list(arguments)
        named = ", ".join(repr(a) for a in self.arguments)
        super().__init__(f"no document has the id, or was indexed from the path, {named}")


class WorkspaceNotFoundError(RagkitError, LookupError):
    """A listing command (``status``, ``documents``, ``check``, ``export``) on an
    embedded workspace that no write ever made (no folder under ``working_dir``):
    most often the wrong working dir, so the message says which one was looked
    at and how to point at another; the command creates nothing."""

    def __init__(self, workspace: str, working_dir: str) -> None:
        self.workspace, self.working_dir = workspace, working_dir
        super().__init__(
            f"no workspace {workspace!r} in {working_dir} (nothing was ever indexed there; this command "
            "creates nothing). Fix: index something first (`ragkit index PATH`), or point to existing data "
            "with --config FILE, RAGKIT_WORKING_DIR or RAGKIT_WORKSPACE (after `make demo`: "
            "`--config .demo/ragkit.toml`)"
        )


class InputNotFoundError(RagkitError, FileNotFoundError):
    """Files or folders given to ``RAG.insert(paths=...)`` that do not exist;
    ``paths`` lists them. Raised before anything is loaded or written."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = list(paths)
        named = ", ".join(repr(p) for p in self.paths)
        super().__init__(
            f"insert(paths=...): no such file or folder: {named}{_relative_to(self.paths)}; nothing was "
            "indexed. Fix: correct or drop the path"
        )


def _relative_to(paths: list[str]) -> str:
    return f" (relative to {os.getcwd()!r})" if any(not os.path.isabs(p) for p in paths) else ""


def public_message(exc: BaseException) -> str:
    """What a client may be told about ``exc``: ``Type: text``, the text being
    a ``ModelError``'s ``public``, another ragkit error's own (redacted)
    message, or for anything else only that it was unexpected."""
    from ragkit.redact import redact  # a store's message may quote a backend's password

    if isinstance(exc, ModelError):
        text = exc.public
    elif isinstance(exc, RagkitError):
        text = redact(str(exc), exc=exc)
    else:
        text = "unexpected error; the log has the details"
    return f"{type(exc).__name__}: {text}"


def describe_validation_error(exc: Exception) -> str:
    """A pydantic ValidationError as 'field: problem' lines, *without* the input
    values, which may be secrets (an API key in the wrong field)."""
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return str(exc)
    lines = []
    for err in errors(include_input=False, include_url=False):
        loc = ".".join(str(p) for p in err.get("loc", ())) or "(options)"
        lines.append(f"{loc}: {err.get('msg')}")
    return "; ".join(lines)

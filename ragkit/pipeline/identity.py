"""Document identity: when two submissions are one document, and which earlier
version a new one replaces.

Trusted callers (the CLI, the library without a principal) keep the rules they
always had: a document's id comes from its content alone, its path key is the
path it was indexed from, and inserting known content with another access list
changes that document's list.

A write made *as a principal* (every keyed request of ``ragkit serve``) may
only change what that principal may read, and may learn nothing of the rest.
Content-derived ids and bare paths would break both: resubmitting a hidden
document's text would find it ("skipped", then relisted for the submitter), and
uploading another ``report.md`` would replace someone else's. So a principal's
submissions live in identity spaces of their own:

- the id is derived from the content *and the access list*. A submission can
  only coincide with a document that has the same list, and the submitter must
  be on that list (``claim`` refuses a list that would hide the document from
  its own writer), so whatever it coincides with, the submitter may read. It
  never coincides with a trusted document, whose id is the content's alone.
- the path key is the path within the *submitting user's* space: a user's new
  ``report.md`` replaces that user's earlier one (whatever its list), never
  another user's, and never a trusted document of that path. The space is kept
  in the document's metadata (``PATH_SPACE``), so deletes and recovery find the
  key again.

Extraction answers of a principal's submission are cached in its list's space
too (``cache_space``): a hit, seen as an ingestion that makes no model calls,
would otherwise say that a hidden document holds the same text.

Paths. A file loaded from disk carries its absolute path (``SOURCE_PATH``,
resolved by the loader in the folder it ran in), and that is its path key: the
file is the same whichever folder ``ragkit index`` or ``ragkit delete`` runs
in, and whether it was named ``corpus/a.txt`` or ``/data/corpus/a.txt``.
``Document.file_path`` stays as the user gave it (what listings and citations
show). Workspaces indexed before the absolute path was kept have keys by
``file_path``: ``path_keys`` returns that key second, so re-indexing such a
file still replaces its old version.

The trade: the same file submitted by two users, or under two lists, is two
documents; the same file indexed by the CLI and uploaded over HTTP is two too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ragkit.access import AccessList, Principal, allows
from ragkit.errors import WriteAccessError
from ragkit.ids import digest
from ragkit.schema import Document, JSONScalar

PATH_SPACE = "ragkit_path_space"
"""Metadata key: the submitting user's path space (a digest, not the name)."""
SOURCE_PATH = "ragkit_source_path"
"""Metadata key: the absolute path of the file a document was loaded from."""
_SEPARATOR = "\x1f"  # no path a loader keeps holds it: a spaced key never equals a trusted one


def access_space(access: AccessList | None) -> str:
    """The identity space of an access list (public: ``AccessList()`` or none)."""
    if access is None or access.public:
        return digest("access", "public")
    return digest("access", "users", *access.users, "groups", *access.groups)


def user_space(principal: Principal) -> str:
    return digest("user", principal.user)


def check_writable(access: AccessList | None, principal: Principal) -> None:
    """A principal may not write a document it could not read afterwards: it
    could neither see, change nor delete it, and a list naming others only is
    how a hidden document's identity would be guessed."""
    if not allows(access, principal):
        raise WriteAccessError(
            f"the access list would hide the document from its writer (user {principal.user!r}"
            f"{', groups ' + ', '.join(sorted(principal.groups)) if principal.groups else ''}). "
            "Fix: include your user or one of your groups in the access list, or give none (everyone)"
        )


def claim(docs: Sequence[Document], principal: Principal, access: AccessList | None) -> list[Document]:
    """``docs`` as ``principal`` submits them: each with its own list, or
    ``access`` (none: everyone), its id in its list's space, its path in the
    user's space. Every list is checked before anything is returned."""
    lists = [doc.access if doc.access is not None else access for doc in docs]
    for listed in lists:
        check_writable(listed, principal)
    meta = {PATH_SPACE: user_space(principal)}
    return [
        doc.model_copy(update={
            "id": "doc-" + digest(doc.content, access_space(listed)),
            "access": None if listed is None or listed.public else listed,
            "metadata": {**doc.metadata, **meta},
        })
        for doc, listed in zip(docs, lists)
    ]


def cache_space(doc: Document) -> str | None:
    """The space a document's extraction answers are cached in: its list's for
    a principal's submission (a cache hit would tell the submitter that a
    document it may not read holds the same text), none for a trusted one."""
    return access_space(doc.access) if PATH_SPACE in doc.metadata else None


def path_key(file_path: str | None, metadata: Mapping[str, JSONScalar] | None) -> str | None:
    """The ``doc_paths`` key of a document indexed from ``file_path``: by its
    absolute source path when the loader recorded one."""
    return path_keys(file_path, metadata)[0] if file_path else None


def path_keys(file_path: str | None, metadata: Mapping[str, JSONScalar] | None) -> list[str]:
    """Every key a document indexed from ``file_path`` may be found under: its
    key (``path_key``) first, then the one by ``file_path`` alone that
    workspaces from before ``SOURCE_PATH`` hold."""
    if not file_path:
        return []
    metadata = metadata or {}
    space = metadata.get(PATH_SPACE)
    paths = [str(p) for p in (metadata.get(SOURCE_PATH), file_path) if p]
    keys = [f"{_SEPARATOR}{space}{_SEPARATOR}{p}" if space else p for p in paths]
    return list(dict.fromkeys(keys))

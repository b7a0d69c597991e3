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
    """The ``doc_paths`` key of a document indexed from ``file_path``."""
    if not file_path:
        return None
    space = (metadata or {}).get(PATH_SPACE)
    return f"{_SEPARATOR}{space}{_SEPARATOR}{file_path}" if space else file_path

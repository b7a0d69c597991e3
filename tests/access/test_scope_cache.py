"""A principal's scope is kept while the status records stay as they are,
because reading them all per query costs most at scale: queries made as a
principal read no status record until
one changes, and a change made by another process is seen at the next query.

Troubleshoot: ``ragkit.core.scope.ReadableScopes`` keeps the scopes per
doc-status store and generation (``DocStatusStore.generation``); a write that
does not move the generation, or a generation kept in the process's memory,
leaves a principal reading what it may no longer read.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from ragkit.access import AccessList
from ragkit.core.scope import resolve_scope
from ragkit.testing.spies import count_listings

from .conftest import ALICE, BOB, PUBLIC, TEAM, make_rag

QUESTION = "Who leads Project Falcon?"

CHILD = textwrap.dedent("""
    import asyncio, json, sys
    from ragkit.backends import build_store
    from ragkit.schema import DocStatusRecord
    from ragkit.settings import Settings

    async def main(folder, records):
        store = build_store(Settings(working_dir=folder), "doc_status", "doc_status")
        async with store:
            await store.upsert([DocStatusRecord.model_validate(r) for r in records])

    asyncio.run(main(sys.argv[1], json.loads(sys.argv[2])))
""")


def write_in_another_process(folder: Path, records) -> None:
    """Upsert status records from a separate Python process (its own connection)."""
    payload = json.dumps([r.model_dump(mode="json") for r in records])
    subprocess.run([sys.executable, "-c", CHILD, str(folder), payload], check=True, timeout=120)




async def readable(rag, principal) -> set[str]:
    scope = await resolve_scope(rag.stores, None, None, principal)
    assert scope is not None
    return scope.doc_ids


async def test_queries_as_a_principal_read_no_status_record_while_none_changes(acl_workdir):
    """The second and later queries of a principal list no status record; after a write
    through this process the next query lists none either (the change feed names the
    record), and the answer follows it.
    Failed before the change: every query listed every record."""
    async with make_rag(acl_workdir) as rag:
        listings = count_listings(rag.stores.doc_status)
        first = await rag.aquery(QUESTION, mode="local", principal=ALICE, only_need_context=True)
        assert listings[0] >= 1
        listings[0] = 0
        for _ in range(3):
            again = await rag.aquery(QUESTION, mode="local", principal=ALICE, only_need_context=True)
            assert again.context == first.context
        assert listings[0] == 0, f"{listings[0]} listings of the status records while none changed"
        assert "Dana Reyes" in first.context

        team = await _record(rag, TEAM)
        listings[0] = 0
        await rag.stores.doc_status.upsert([team.model_copy(update={"access": AccessList(groups=["exec"])})])
        revoked = await rag.aquery(QUESTION, mode="local", principal=ALICE, only_need_context=True)
        assert listings[0] == 0, "a write of one record made the next query list every record"
        assert "Dana Reyes" not in revoked.context


async def test_a_write_by_another_process_is_seen_at_the_next_query(acl_workdir):
    """Two processes over one workspace: this one keeps ALICE's and BOB's
    scopes; another one revokes ALICE's group from the team document and
    grants it to BOB. The next queries here follow both changes."""
    async with make_rag(acl_workdir) as rag:
        team = await _record(rag, TEAM)
        public = await _record(rag, PUBLIC)
        assert await readable(rag, ALICE) == {public.id, team.id}
        assert await readable(rag, BOB) == {public.id}
        before = await rag.aquery(QUESTION, mode="local", principal=ALICE, only_need_context=True)
        assert "Dana Reyes" in before.context

        write_in_another_process(acl_workdir, [team.model_copy(update={"access": AccessList(users=["bob"])})])
        assert await readable(rag, ALICE) == {public.id}
        assert await readable(rag, BOB) == {public.id, team.id}
        after = await rag.aquery(QUESTION, mode="local", principal=ALICE, only_need_context=True)
        assert "Dana Reyes" not in after.context
        as_bob = await rag.aquery(QUESTION, mode="local", principal=BOB, only_need_context=True)
        assert "Dana Reyes" in as_bob.context


async def test_a_store_without_a_generation_keeps_nothing(acl_workdir, monkeypatch):
    """An adapter that keeps no generation (a third party's, say) is read on
    every query, as before: nothing kept can go stale."""
    from ragkit.core.scope import ReadableScopes

    async with make_rag(acl_workdir) as rag:
        store = rag.stores.doc_status
        monkeypatch.setattr(type(store), "capabilities", frozenset())
        assert await store.generation() is None
        listings = count_listings(store)
        for _ in range(2):
            await rag.aquery(QUESTION, mode="local", principal=ALICE, only_need_context=True)
        assert listings[0] >= 2
        assert not ReadableScopes.of(store).scopes


async def _record(rag, doc):
    """The stored status record of a corpus document (ids are given in its list's space)."""
    page = await rag.stores.doc_status.list_page(limit=100)
    (found,) = [r for r in page.items if r.file_path == doc.file_path]
    return found


async def test_at_most_kept_principals_per_store_least_recently_used_first(acl_workdir, monkeypatch):
    """Each kept scope holds its documents' and chunks' ids: the store keeps
    ``KEPT`` principals, dropping the one unused longest."""
    from ragkit.access import Principal
    from ragkit.core.scope import ReadableScopes

    monkeypatch.setattr(ReadableScopes, "KEPT", 3)
    async with make_rag(acl_workdir) as rag:
        kept = ReadableScopes.of(rag.stores.doc_status)
        readers = [Principal(user=f"u{i}") for i in range(4)]
        for reader in readers[:3]:
            await readable(rag, reader)
        await readable(rag, readers[0])  # used again: now the most recent
        await readable(rag, readers[3])
        assert list(kept.scopes) == [(p.user, p.groups) for p in (readers[2], readers[0], readers[3])]


async def test_kept_scopes_hold_at_most_kept_ids(acl_workdir, monkeypatch):
    """A bound on the ids all kept scopes hold: older scopes go first, the one
    just resolved stays even alone over the bound."""
    from ragkit.access import Principal
    from ragkit.core.scope import ReadableScopes

    async with make_rag(acl_workdir) as rag:
        kept = ReadableScopes.of(rag.stores.doc_status)
        one = await resolve_scope(rag.stores, None, None, Principal(user="u0"))
        size = len(one.doc_ids) + len(one.chunk_ids)
        monkeypatch.setattr(ReadableScopes, "KEPT_IDS", 2 * size)
        for i in range(1, 4):
            await readable(rag, Principal(user=f"u{i}"))
        assert [user for user, _ in kept.scopes] == ["u2", "u3"]
        monkeypatch.setattr(ReadableScopes, "KEPT_IDS", 0)
        await readable(rag, ALICE)
        assert list(kept.scopes) == [(ALICE.user, ALICE.groups)]

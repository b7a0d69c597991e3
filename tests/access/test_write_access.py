"""The write rule through the Python API (``principal=`` on inserts, deletes
and graph edits): a principal may only change, and only be told about, what it
may read; a hidden element or document answers exactly like an absent one.

The corpus (conftest): PUBLIC (everyone), TEAM (group falcon), SECRET (user
mallory, group exec). BOB reads PUBLIC only, ALICE reads PUBLIC and TEAM.
"Project Falcon" is hidden from BOB (only TEAM and SECRET mention it), merged
from a readable and a hidden source for ALICE; "Zephyr Dynamics" is SECRET's alone.
"""

from __future__ import annotations

import pytest

from ragkit.access import AccessList, Principal
from ragkit.errors import DocumentNotFoundError, ElementExistsError, ElementNotFoundError, WriteAccessError
from ragkit.schema import Document

from .conftest import ALICE, BOB, MALLORY, PUBLIC, SECRET, TEAM, assert_clean, make_rag

CANARY = "CANARY-ORCHID-7731"


def _masked(message: str, name: str) -> str:
    """The message with the name the caller gave (as given or as a key) blanked."""
    return message.replace(name, "NAME").replace(name.lower(), "NAME")


async def _error(call) -> tuple[type, str]:
    with pytest.raises(Exception) as info:
        await call
    return type(info.value), str(info.value)


async def test_a_hidden_entity_answers_like_an_absent_one_for_every_edit(acl_workdir):
    async with make_rag(acl_workdir) as rag:
        for hidden, absent in (("Project Falcon", "Nobody Known"), ("Zephyr Dynamics", "Nowhere Inc")):
            edits = [
                lambda n: rag.aedit_entity(n, description="x", principal=BOB),
                lambda n: rag.arename_entity(n, "Renamed Thing", principal=BOB),
                lambda n: rag.adelete_entity(n, principal=BOB),
                lambda n: rag.amerge_entities([n], "Harbor City", principal=BOB),
                lambda n: rag.amerge_entities(["Harbor Council"], n, principal=BOB),
                lambda n: rag.acreate_relation(n, "Harbor City", principal=BOB),
                lambda n: rag.aedit_relation(n, "Harbor City", description="x", principal=BOB),
                lambda n: rag.adelete_relation(n, "Harbor City", principal=BOB),
            ]
            for edit in edits:
                kind, message = await _error(edit(hidden))
                want_kind, want = await _error(edit(absent))
                assert kind is want_kind is ElementNotFoundError
                assert _masked(message, hidden) == _masked(want, absent)
        # Unchanged by all of that: the canary is still in the merged description.
        assert CANARY in (await rag.aentity("Project Falcon")).properties["description"]


async def test_creating_a_hidden_entity_is_no_oracle_and_leaves_the_hidden_one_alone(acl_workdir):
    async with make_rag(acl_workdir) as rag:
        made = await rag.acreate_entity("Zephyr Dynamics", "organization", "A name bob chose.", principal=BOB)
        assert_clean(str({k: v for k, v in made.items() if k != "name"}), "bob's created entity")
        assert made["description"] == "A name bob chose."
        with pytest.raises(ElementExistsError):  # now it is his to see
            await rag.acreate_entity("Zephyr Dynamics", principal=BOB)
        everything = await rag.aentity("Zephyr Dynamics")
        mallory = await rag.aentity("Zephyr Dynamics", principal=MALLORY)
        alice = await rag.aentity("Zephyr Dynamics", principal=ALICE)
    assert CANARY in everything.properties["description"] and "A name bob chose." in everything.properties["description"]
    assert CANARY in mallory.properties["description"]
    # A manual fact has no access list: every reader sees it, like a document without one.
    assert alice is not None and alice.properties["description"] == "A name bob chose."


async def test_an_edit_rewrites_the_readable_fragments_only_and_answers_like_a_read(acl_workdir):
    async with make_rag(acl_workdir) as rag:
        edited = await rag.aedit_entity("Project Falcon", description="Falcon, as alice says.", principal=ALICE)
        assert_clean(str(edited), "alice's edit response")
        assert edited["description"] == "Falcon, as alice says."
        assert set(edited["source_ids"]) <= set(await _chunk_ids(rag, TEAM.id))
        mallory = await rag.aentity("Project Falcon", principal=MALLORY)
        everything = await rag.aentity("Project Falcon")
        relation = await rag.aedit_relation("Project Falcon", "Harbor City", weight=4.0, principal=ALICE)
        assert_clean(str(relation), "alice's relation edit")
        assert relation["weight"] == pytest.approx(4.0)
    assert CANARY in mallory.properties["description"] and "alice" not in mallory.properties["description"]
    assert CANARY in everything.properties["description"] and "Falcon, as alice says." in everything.properties["description"]


async def test_rename_and_merge_move_only_the_readable_fragments(acl_workdir):
    async with make_rag(acl_workdir) as rag:
        renamed = await rag.arename_entity("Project Falcon", "Falcon Programme", principal=ALICE)
        assert_clean(str(renamed), "alice's rename")
        # SECRET still names it Project Falcon: mallory's view is untouched.
        mallory = await rag.aentity("Project Falcon", principal=MALLORY)
        assert mallory is not None and CANARY in mallory.properties["description"]
        assert await rag.aentity("Project Falcon", principal=ALICE) is None
        # Renaming onto a name only a hidden document uses is no 409 either.
        onto_hidden = await rag.arename_entity("Harbor Council", "Zephyr Dynamics", principal=BOB)
        assert_clean(str({k: v for k, v in onto_hidden.items() if k != "name"}), "bob's rename")
        merged = await rag.amerge_entities(["Dana Reyes"], "Falcon Programme", principal=ALICE)
        assert_clean(str(merged), "alice's merge")
        secret_zephyr = await rag.aentity("Zephyr Dynamics", principal=MALLORY)
    assert CANARY in secret_zephyr.properties["description"]


async def test_deleting_an_entity_removes_the_readable_fragments_only(acl_workdir):
    async with make_rag(acl_workdir) as rag:
        await rag.adelete_entity("Harbor City", principal=BOB)
        assert await rag.aentity("Harbor City", principal=BOB) is None
        alice = await rag.aentity("Harbor City", principal=ALICE)
        mallory = await rag.aentity("Harbor City", principal=MALLORY)
    assert alice is not None and [s.doc_id for s in alice.sources] == [TEAM.id]
    assert mallory is not None and [s.doc_id for s in mallory.sources] == [SECRET.id]


async def test_resubmitting_a_hidden_documents_text_neither_finds_nor_changes_it(acl_workdir):
    async with make_rag(acl_workdir) as rag:
        (before,) = await rag.stores.doc_status.get([SECRET.id])
        _, report = await rag.ainsert(SECRET.content, access=AccessList(users=["bob"]), principal=BOB)
        (after,) = await rag.stores.doc_status.get([SECRET.id])
        page = await rag.adocuments(principal=BOB)
        again = (await rag.ainsert(SECRET.content, access=AccessList(users=["bob"]), principal=BOB))[1]
    assert report.processed and SECRET.id not in report.processed and not report.skipped
    assert after == before and after.access == AccessList(users=["mallory"], groups=["exec"])
    assert SECRET.id not in {d.id for d in page.documents}
    assert again.skipped == report.processed  # his own copy: found, as it is his to read


async def test_a_list_that_hides_the_document_from_its_writer_is_refused(acl_workdir):
    async with make_rag(acl_workdir) as rag:
        total = (await rag.adocuments()).total
        with pytest.raises(WriteAccessError, match="include your user"):
            await rag.ainsert(["new text one", "new text two"], access=AccessList(groups=["exec"]), principal=BOB)
        assert (await rag.adocuments()).total == total
        _, report = await rag.ainsert("A falcon note.", access=AccessList(groups=["falcon"]), principal=ALICE)
        assert len(report.processed) == 1


async def test_same_named_files_of_two_users_never_replace_each_other(acl_workdir):
    mine = Document.from_text("Alice's report names Project Falcon.", file_path="report.md")
    theirs = Document.from_text("Bob's report is about the Harbor Council.", file_path="report.md")
    newer = Document.from_text("Bob's report, second version.", file_path="report.md")
    async with make_rag(acl_workdir) as rag:
        (a,) = (await rag.ainsert(documents=[mine], access=AccessList(groups=["falcon"]), principal=ALICE))[1].processed
        (b,) = (await rag.ainsert(documents=[theirs], principal=BOB))[1].processed
        alice_docs = {d.id for d in (await rag.adocuments(principal=ALICE)).documents}
        (bob_record,) = await rag.stores.doc_status.get([b])
        # A user's new version of a path replaces that user's earlier one.
        _, report = await rag.ainsert(documents=[newer], principal=BOB)
        (old_b, still_a) = await rag.stores.doc_status.get([b, a])
    assert a in alice_docs and b in alice_docs
    assert bob_record.access is None, "bob's text must not inherit alice's list through the path"
    assert report.replaced == [b] and old_b is None and still_a is not None


async def test_deletes_by_id_or_path_name_readable_documents_only(acl_workdir):
    async with make_rag(acl_workdir) as rag:
        for hidden, absent in ((SECRET.id, "doc-0000"), ("secret/merger.txt", "nowhere/none.txt")):
            kind, message = await _error(rag.adelete([hidden], principal=BOB))
            want_kind, want = await _error(rag.adelete([absent], principal=BOB))
            assert kind is want_kind is DocumentNotFoundError
            assert _masked(message, hidden) == _masked(want, absent)
        with pytest.raises(DocumentNotFoundError):  # all or nothing: the readable one stays too
            await rag.adelete([PUBLIC.id, SECRET.id], principal=BOB)
        assert await rag.adelete(["team/falcon.txt"], principal=ALICE) == [TEAM.id]
        assert {r.id for r in await rag.stores.doc_status.get([PUBLIC.id, SECRET.id]) if r} == {PUBLIC.id, SECRET.id}


async def test_a_principal_reading_everything_edits_as_before(acl_workdir):
    boss = Principal(user="boss", groups=frozenset({"falcon", "exec"}))
    async with make_rag(acl_workdir) as rag:
        edited = await rag.aedit_entity("Project Falcon", description="One line for all.", principal=boss)
        everything = await rag.aentity("Project Falcon")
    assert edited["description"] == everything.properties["description"] == "One line for all."


async def _chunk_ids(rag, doc_id: str) -> list[str]:
    (record,) = await rag.stores.doc_status.get([doc_id])
    return record.chunk_ids


async def test_resubmitting_hidden_text_gets_no_cache_hit(acl_workdir):
    """A hit would show as an ingestion making no model calls: proof that a
    hidden document holds the text. The submitter's own resubmission hits."""
    async with make_rag(acl_workdir) as rag:
        stats = rag.llm.stats
        (mine,) = (await rag.ainsert(SECRET.content, principal=BOB))[1].processed
        assert stats.cache_hits["extraction"] == 0 and stats.calls["extraction"] > 0
        await rag.ainsert(SECRET.content, access=AccessList(users=["bob"]), principal=BOB)
        assert stats.cache_hits["extraction"] == 0, "another list is another space"
        calls = stats.calls["extraction"]
        await rag.adelete([mine], principal=BOB)
        await rag.ainsert(SECRET.content, principal=BOB)
    assert stats.calls["extraction"] == calls and stats.cache_hits["extraction"] > 0

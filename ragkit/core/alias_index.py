"""Entity resolution at index time: synonym links between entities whose names
are aliases (the rules: ``ragkit.core.aliases``), kept up to date as entities
come and go, and the user's splits of wrong ones.

The form is HippoRAG 2's synonym edges, not merged nodes: each name stays an
entity with its own sources, and a link joins the two for the ``ppr`` walk
(``query/ppr.py``). Why not merge: a merged node's key would depend on which
alias came first, and deleting that document would have to re-key the rest;
links are a function of the set of entity keys alone, so an update adds the
links of new keys and removes those of keys that are gone, and the result is
what a fresh index of the remaining documents holds (tested).

A pair is linked when the rules (or the check) say so and its two keys share
a block of ``CAP`` keys or fewer: still a function of the set of keys, and
each new key costs at most ``CAP`` comparisons per block, whatever the size of
the workspace. A block that grows past ``CAP`` drops the links no other block
keeps; one that shrinks back compares its pairs once.

Storage, in the ``aliases`` KV namespace (derived: rebuilt from the graph by
``rebuild``):

- ``block:<block key>`` -> ``{"keys": [entity keys]}``: who to compare a new
  name with (``core.aliases.blocks``);
- ``links:<entity key>`` -> ``{"links": {other key: reason}}``.

and in ``alias_splits`` (the user's, never derived, kept through deletes and
re-indexing): ``<key a>\\x1f<key b>`` (in order) -> ``{"a", "b"}``: a pair the
rules link and a user said is two entities (``ragkit graph aliases --split``).
"""

from __future__ import annotations

import itertools
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass

from ragkit.core.stores import in_pages
from ragkit.core.aliases import MAYBE, SAME, blocks, match, read
from ragkit.ids import normalize_name
from ragkit.protocols import KVStore

_BLOCK = "block:"
_LINKS = "links:"
_SEP = "\x1f"
CAP = 128
"""The most keys a block compares. A block holds the names that share a core,
an acronym, or a first initial and a last word; on MuSiQue (19,138 entity
keys, 44,103 blocks) the largest holds 90. A block much larger is a word too
common to tell aliases by (a number, a title), and comparing each new key with
all of it made indexing quadratic: the synthetic copies of the scale benchmark,
whose names all end in the copy's number, spent a third of their time there."""


@dataclass(frozen=True)
class Alias:
    """One link as ``ragkit graph aliases`` shows it."""

    a: str
    b: str
    reason: str
    split: bool = False


def split_key(a: str, b: str) -> str:
    x, y = sorted((a, b))
    return f"{x}{_SEP}{y}"


Check = Callable[[list[tuple[str, str, str]]], Awaitable[set[tuple[str, str]]]]
"""(key, key, why the rules are unsure) pairs -> the pairs that are one entity:
the model check of the pairs the name rules call ``MAYBE`` (``core/alias_check.py``)."""


@dataclass(frozen=True)
class _Placed:
    """An update's blocks in memory (``AliasIndex._place``)."""

    verdicts: dict[tuple[str, str], tuple[str, str]]
    """The rules' verdict of each pair to decide (pairs they do not link left out)."""
    postings: dict[str, set[str]]
    """Each block the update touches, after it."""
    before: dict[str, set[str]]
    """The same blocks as stored."""
    closed: set[str]
    """The blocks that grew past ``cap`` keys."""


class AliasIndex:
    """The links and blocks of one workspace (``aliases``) and its splits (``alias_splits``)."""

    def __init__(self, store: KVStore, splits: KVStore, check: Check | None = None, *, cap: int = CAP) -> None:
        self.store = store
        self.splits = splits
        self.check = check
        """Decides the ``MAYBE`` pairs; ``None``: they stay unlinked."""
        self.cap = cap
        """A pair is linked while its keys share a block of this many keys or fewer."""

    async def update(self, present: Iterable[str], removed: Iterable[str], *, ask: Iterable[str] = ()) -> int:
        """Links for the entity keys ``present`` (new or still there: adding a
        key twice changes nothing) and none for ``removed``. Returns how many
        link records were written or deleted. A key is compared with the
        others of a block when it is new to the block (or in ``ask``), and the
        check is asked about those pairs only: a pair of two keys already there
        was decided when the second came, and a verdict reads the names alone,
        so it stands (its link, if any, is kept)."""
        gone = set(removed)
        here = [k for k in dict.fromkeys(present) if k not in gone]
        if not here and not gone:
            return 0
        placed = await self._place(here, gone, set(ask))
        pairs = await self._decide(placed.verdicts)
        unlinked = await self._unjustified(placed)
        touched = {*here, *gone, *(k for pair in [*pairs, *unlinked] for k in pair)}
        links = await self._links(touched)
        # A gone key's partners (read too, they may be in no block read here) forget it.
        links.update(await self._links({o for k in gone for o in links[k]} - links.keys()))
        stored = {k: dict(v) for k, v in links.items()}
        for key in gone:
            for other in links[key]:
                links[other].pop(key, None)
            links[key] = {}
        for a, b in unlinked:
            links[a].pop(b, None)
            links[b].pop(a, None)
        for (a, b), why in pairs.items():
            links[a][b] = links[b][a] = why
        written = await self._write_links({k: v for k, v in links.items() if v != stored[k]})
        # The blocks last: an update cut short before them finds its keys new
        # again, and asks the check about their pairs again (from the cache).
        await self._write_postings(placed.postings, placed.before)
        return written

    async def _place(self, here: list[str], gone: set[str], ask: set[str]) -> _Placed:
        """Take ``gone`` out of its blocks and put ``here`` in its own (in
        memory), and the verdicts of the pairs to decide: a key and the others
        of a block it is new to (or of each of its blocks, for ``ask``), and
        every pair of a block that shrank back to ``cap`` keys (never compared
        while it was larger). A block over ``cap`` compares nothing."""
        own = {k: blocks(read(k)) for k in [*here, *gone]}
        postings = await self._postings({b for bs in own.values() for b in bs})
        before = {b: set(keys) for b, keys in postings.items()}
        for key in gone:
            for b in own[key]:
                postings[b].discard(key)
        for key in here:
            for b in own[key]:
                postings[b].add(key)
        small = {b for b, keys in postings.items() if len(keys) <= self.cap}
        reopened = {b for b in small if len(before[b]) > self.cap}
        pairs: set[tuple[str, str]] = set()
        for key in here:
            for b in own[key] & small:
                if key in ask or key not in before[b]:
                    pairs.update((key, o) if key < o else (o, key) for o in postings[b] if o != key)
        for b in reopened:
            pairs.update(itertools.combinations(sorted(postings[b]), 2))
        verdicts = {p: v for p in pairs if (v := match(read(p[0]), read(p[1])))}
        closed = {b for b in postings.keys() - small if len(before[b]) <= self.cap}
        return _Placed(verdicts, postings, before, closed)

    async def _unjustified(self, placed: _Placed) -> set[tuple[str, str]]:
        """The links that a block grown past ``cap`` kept and no other block
        keeps: a link stands while its two keys share a block of ``cap`` keys
        or fewer, so the links stay a function of the set of keys."""
        members = {k for b in placed.closed for k in placed.postings[b]}
        if not members:
            return set()
        links = await self._links(members)
        suspects = {(a, b) if a < b else (b, a)
                    for block in placed.closed for a in placed.postings[block] for b in links[a]
                    if b in placed.postings[block]}
        own = {k: blocks(read(k)) for pair in suspects for k in pair}
        shared = {pair: own[pair[0]] & own[pair[1]] for pair in suspects}
        sizes = {b: len(keys) for b, keys in placed.postings.items()}
        unread = {b for bs in shared.values() for b in bs} - sizes.keys()
        sizes.update({b: len(keys) for b, keys in (await self._postings(unread)).items()})
        return {pair for pair, bs in shared.items() if all(sizes[b] > self.cap for b in bs)}

    async def _decide(self, verdicts: Mapping[tuple[str, str], tuple[str, str]]) -> dict[tuple[str, str], str]:
        """The pairs to link, with why: the rules' ``SAME``, and the ``MAYBE``
        the check says are one entity; never a pair a user split."""
        refused = await self._split_pairs(verdicts)
        open_pairs = {p: v for p, v in verdicts.items() if split_key(*p) not in refused}
        linked = {p: why for p, (sure, why) in open_pairs.items() if sure == SAME}
        unsure = sorted((a, b, why) for (a, b), (sure, why) in open_pairs.items() if sure == MAYBE)
        if self.check is not None and unsure:
            confirmed = await self.check(unsure)
            linked.update({(a, b): f"{why}, checked" for a, b, why in unsure if (a, b) in confirmed})
        return linked

    async def links_of(self, keys: Iterable[str]) -> dict[str, dict[str, str]]:
        """Each key's linked keys with the reason (keys without links left out)."""
        found = await self._links(keys)
        return {k: v for k, v in found.items() if v}

    async def all(self) -> list[Alias]:
        """Every link once (a < b), and every split pair, by key."""
        out: dict[tuple[str, str], Alias] = {}
        async for page in in_pages(self.store.keys(), 512):
            keys = [k for k in page if k.startswith(_LINKS)]
            for key, rec in zip(keys, await self.store.get_many(keys)):
                a = key[len(_LINKS):]
                for b, why in (rec or {}).get("links", {}).items():
                    x, y = sorted((a, b))
                    out.setdefault((x, y), Alias(x, y, why))
        async for key in self.splits.keys():
            a, b = key.split(_SEP, 1)
            verdict = match(read(a), read(b))
            out[(a, b)] = Alias(a, b, verdict[1] if verdict else "split", split=True)
        return [out[k] for k in sorted(out)]

    async def named(self) -> set[str]:
        """Every entity key a block or a link names (``ragkit check`` compares
        them with the graph's: a key that is no entity is a leftover)."""
        out: set[str] = set()
        async for page in in_pages(self.store.keys(), 512):
            for key, rec in zip(page, await self.store.get_many(page)):
                if key.startswith(_BLOCK):
                    out.update((rec or {}).get("keys", ()))
                elif key.startswith(_LINKS):
                    out.add(key[len(_LINKS):])
                    out.update((rec or {}).get("links", {}))
        return out

    async def split(self, first: str, second: str) -> Alias:
        """Unlink the entities named ``first`` and ``second`` and keep them
        apart from now on (re-indexing either does not link them again)."""
        a, b = sorted((normalize_name(first), normalize_name(second)))
        verdict = match(read(a), read(b))
        if a == b or verdict is None:
            raise ValueError(f"{first!r} and {second!r} are not linked by the alias rules: nothing to split")
        await self.splits.upsert({split_key(a, b): {"a": a, "b": b}})
        links = await self._links([a, b])
        links[a].pop(b, None)
        links[b].pop(a, None)
        await self._write_links(links)  # both records: rewriting an unchanged one is harmless
        return Alias(a, b, verdict[1], split=True)

    async def join(self, first: str, second: str) -> bool:
        """Undo a split: the rules link the pair again where both entities exist.
        False when the pair was not split."""
        a, b = sorted((normalize_name(first), normalize_name(second)))
        (found,) = await self.splits.get_many([split_key(a, b)])
        if found is None:
            return False
        await self.splits.delete([split_key(a, b)])
        present = [k for k in (a, b) if await self._in_blocks(k)]
        await self.update(present, [], ask=present)
        return True

    async def rebuild(self, keys: Iterable[str]) -> int:
        """Replace every block and link with those of ``keys`` (all the graph's
        entity keys): the repair for a store an interrupted update left behind."""
        await self.store.drop()
        return await self.update(keys, [])

    async def _in_blocks(self, key: str) -> bool:
        core = "c:" + read(key).core
        return key in (await self._postings({core}))[core]

    async def _postings(self, block_keys: set[str]) -> dict[str, set[str]]:
        ordered = sorted(block_keys)
        records = await self.store.get_many([_BLOCK + b for b in ordered])
        return {b: set(rec["keys"]) if rec else set() for b, rec in zip(ordered, records)}

    async def _links(self, keys: Iterable[str]) -> dict[str, dict[str, str]]:
        ordered = sorted(set(keys))
        records = await self.store.get_many([_LINKS + k for k in ordered])
        return {k: dict(rec["links"]) if rec else {} for k, rec in zip(ordered, records)}

    async def _split_pairs(self, pairs: Mapping[tuple[str, str], str]) -> set[str]:
        wanted = sorted({split_key(*p) for p in pairs})
        return {k for k, rec in zip(wanted, await self.splits.get_many(wanted)) if rec is not None}

    async def _write_postings(self, postings: dict[str, set[str]], before: dict[str, set[str]]) -> None:
        changed = {b: keys for b, keys in postings.items() if keys != before[b]}
        await self.store.upsert({_BLOCK + b: {"keys": sorted(keys)} for b, keys in changed.items() if keys})
        await self.store.delete([_BLOCK + b for b, keys in changed.items() if not keys])

    async def _write_links(self, links: dict[str, dict[str, str]]) -> int:
        """Write every record in ``links`` (a key with none is deleted)."""
        await self.store.upsert({_LINKS + k: {"links": dict(sorted(v.items()))} for k, v in links.items() if v})
        await self.store.delete([_LINKS + k for k, v in links.items() if not v])
        return len(links)

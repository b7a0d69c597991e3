"""``ragkit graph aliases``: the entities entity resolution linked as one, and
the user's say over them (split a wrong link, join it again, rebuild)."""

from __future__ import annotations

import argparse
import asyncio
from dataclasses import asdict

from ragkit.cli.output import print_json, table
from ragkit.cli.workspace import existing
from ragkit.core.alias_index import Alias, AliasIndex
from ragkit.errors import ConfigError
from ragkit.ids import normalize_name
from ragkit.rag import RAG


async def _aliases(args: argparse.Namespace) -> tuple[list[Alias], str]:
    async with RAG(existing(args.config)) as rag:
        index = rag.indexer().alias_index()
        said = ""
        if args.split or args.join or args.rebuild:
            async with rag.stores.writing("aliases"):
                said = await _change(rag, index, args)
        links = await index.all()
    if args.of:
        key = normalize_name(args.of)
        links = [a for a in links if key in (a.a, a.b)]
    return links, said


async def _change(rag: RAG, index: AliasIndex, args: argparse.Namespace) -> str:
    if args.rebuild:
        keys = [n.id async for n in rag.stores.graph.nodes()]
        await index.rebuild(keys)
        return f"rebuilt the links of {len(keys)} entities"
    first, second = args.split or args.join
    # A split needs both entities (a typo must not record a split of nothing);
    # a join may undo the split of a pair whose entity is gone.
    missing = [n for n, p in zip((first, second), await rag.stores.graph.get_nodes(
        [normalize_name(first), normalize_name(second)])) if p is None]
    if missing and args.split:
        raise ConfigError(f"no entity named {missing[0]!r} in this workspace. "
                          "Fix: use a name `ragkit graph aliases` lists")
    if args.split:
        try:
            alias = await index.split(first, second)
        except ValueError as exc:
            raise ConfigError(f"{exc}. Fix: use a pair `ragkit graph aliases` lists") from None
        return f"split {alias.a!r} and {alias.b!r}: they stay apart, also when re-indexed"
    if not await index.join(first, second):
        raise ConfigError(f"{first!r} and {second!r} were not split. Fix: `ragkit graph aliases` marks split pairs")
    return f"joined {first!r} and {second!r} again"


def run(args: argparse.Namespace) -> int:
    if sum(bool(x) for x in (args.split, args.join, args.rebuild)) > 1:
        raise ConfigError("give one of --split, --join and --rebuild")
    links, said = asyncio.run(_aliases(args))
    if args.json:
        print_json({"aliases": [asdict(a) for a in links], "done": said})
        return 0
    if said:
        print(said)
    print(table(["entity", "alias", "why", "split"], [(a.a, a.b, a.reason, "split" if a.split else "") for a in links]))
    linked = sum(not a.split for a in links)
    print(f"{linked} alias link(s), {len(links) - linked} split pair(s)")
    return 0

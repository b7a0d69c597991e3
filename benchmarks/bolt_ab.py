"""The Bolt stand-in's graph reads, A/B: Nagle on (as FalkorDB's listener ships)
or off (``tcp_nodelay.c``), properties one record per property or one map per
node/edge, on two stand-ins holding the same graph (copied with DUMP/RESTORE).

    # a stand-in with an indexed graph (e.g. from benchmarks/store_calls.py), its Redis port 6497;
    # a base checkout's bolt-server (no tcp_nodelay) on 7801/6501, this checkout's on 7802/6502:
    python benchmarks/bolt_ab.py 6497 7801:6501 7802:6502 [rounds]

Each round takes 40 random entity ids and runs the local mode's four graph
statements (nodes, degrees, neighbours, edges) on every combination, one
after the other, and prints the median ms and rows per statement.
"""

import asyncio
import random
import statistics
import sys
import time

import redis
from neo4j import AsyncGraphDatabase

SRC, A, B = int(sys.argv[1]), sys.argv[2], sys.argv[3]   # src redis port; "bolt:redis" ports
dump = redis.Redis(port=SRC).dump("falkordb")
servers = {}
for name, spec in (("nagle", A), ("nodelay", B)):
    bolt, rport = spec.split(":")
    r = redis.Redis(port=int(rport)); r.delete("falkordb"); r.restore("falkordb", 0, dump)
    servers[name] = f"bolt://127.0.0.1:{bolt}"
r = redis.Redis(port=SRC)
lab = [l[0].decode() for l in r.execute_command("GRAPH.RO_QUERY", "falkordb", "CALL db.labels()")[1] if l[0].endswith(b".graph")][0]
L = f"`{lab}`"
all_ids = [x[0].decode() for x in r.execute_command("GRAPH.RO_QUERY", "falkordb", f"MATCH (n:{L}) RETURN n._ragkit_id")[1]]
random.seed(0)
def lit(xs): return "[" + ", ".join("'" + i.replace("\\", "\\\\").replace("'", "\\'") + "'" for i in xs) + "]"
def per_prop(v): return f"UNWIND keys({v}) + [null] AS k RETURN k, {v}[k]"
def whole(v):
    w = f"size(toJSON(properties({v}))) <= 7500"
    return f"UNWIND CASE WHEN {w} THEN [null] ELSE keys({v}) + [null] END AS k RETURN k, CASE WHEN k IS NULL THEN CASE WHEN {w} THEN properties({v}) END ELSE {v}[k] END"
def statements(ids, pairs, clause):
    return [
        f"UNWIND {lit(ids)} AS id MATCH (n:{L} {{_ragkit_id: id}}) WITH id, n " + clause("n").replace("RETURN ", "RETURN id, "),
        f"UNWIND {lit(ids)} AS id MATCH (n:{L} {{_ragkit_id: id}}) OPTIONAL MATCH (n)-[r:`RELATED`]-(:{L}) RETURN id, count(DISTINCT r)",
        f"UNWIND {lit(ids)} AS id MATCH (n:{L} {{_ragkit_id: id}}) OPTIONAL MATCH (n)-[:`RELATED`]-(m:{L}) RETURN DISTINCT id, m._ragkit_id",
        "UNWIND [" + ", ".join(lit(list(p)) for p in pairs) + f"] AS p MATCH (a:{L} {{_ragkit_id: p[0]}})-[r:`RELATED`]->(b:{L} {{_ragkit_id: p[1]}}) WITH p, r " + clause("r").replace("RETURN ", "RETURN p[0], p[1], "),
    ]
async def main():
    drivers = {k: AsyncGraphDatabase.driver(u) for k, u in servers.items()}
    times = {}
    for rnd in range(int(sys.argv[4]) if len(sys.argv) > 4 else 15):
        ids = random.sample(all_ids, 40)
        async with drivers["nodelay"].session(fetch_size=-1) as s:
            rows = await (await s.run(statements(ids, [], per_prop)[2])).values()
        pairs = sorted({tuple(sorted((a, b))) for a, b in rows if b is not None})[:120]
        for server in ("nagle", "nodelay"):
            for cname, clause in (("per property", per_prop), ("whole map", whole)):
                for i, q in enumerate(statements(ids, pairs, clause)):
                    t0 = time.perf_counter()
                    async with drivers[server].session(fetch_size=-1) as s:
                        n = len(await (await s.run(q)).values())
                    times.setdefault((server, cname, i), []).append((time.perf_counter() - t0) * 1000)
                    times.setdefault((server, cname, "rows", i), []).append(n)
    for key, ts in times.items():
        print(key, round(statistics.median(ts), 1))
    for d in drivers.values():  # the stand-in's listener breaks on GOODBYE: drop sockets
        for conns in d._pool.connections.values():
            for c in list(conns): c.kill()
        await d.close()
asyncio.run(main())

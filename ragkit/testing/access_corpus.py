"""Documents with access lists that share entities, and what a principal's
query must then show: what a query over only its readable documents shows.

Written for the offline LLM (``ragkit.offline``) and the feature-hashing
embedder, so it needs no model: the tests in ``tests/access`` (the Python API)
and ``tests/server`` (over HTTP) compare each principal's queries with a
readable-only index, item by item and in order.

What the documents provoke:

- Hidden wording: ``FINANCE`` and ``LEGAL`` add long sentences to entities the
  public documents name (Project Cape, Harbor Gate, Tern Pier, Yingchuan
  Electronics...), so their stored vectors embed words only those documents
  hold ("flood", "insurance", "injunction"). A question in those words scores
  every readable item 0: the order is the tie rule's alone.
- Diluted matches: a visible item whose readable description matches a
  question well can rank low by its merged vector, below many wholly readable
  items, and must still rank where the readable-only index ranks it (Tern
  Pier for "harbor dredgers": first for the legal group, while its merged
  vector adds a long finance sentence and ranks it below ten others).
- No summaries: no entity gets the 8 distinct description lines that make the
  index summarise it (a recomputed description is never summarised).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ragkit.access import AccessList, Principal, allows
from ragkit.schema import Document

MODES = ("local", "global", "hybrid", "naive", "mix", "ppr", "bypass")


def _doc(text: str, path: str, **access: list[str]) -> Document:
    doc = Document.from_text(text, file_path=path)
    return doc.model_copy(update={"access": AccessList(**access)}) if access else doc


PUBLIC = _doc(
    "Yingchuan Electronics builds circuit boards in Suzhou. Delta Trading buys boards from Yingchuan Electronics. "
    "Lotus Logistics ships boards from Suzhou to Ningbo. Kestrel Bank lends money to Delta Trading. "
    "Project Cape widens the harbor. Harbor Gate manages the Ningbo harbor and its cranes and berths. "
    "Tern Pier serves the harbor with dredgers. Gull Pier serves the harbor with tugs and pilots. "
    "Heron Dock serves the harbor with cranes and pilots and tugs. Osprey Quay serves the harbor with berths and tugs. "
    "Pelican Wharf serves the harbor with berths and pilots. Cormorant Basin serves the harbor with tugs and cranes. "
    "Albatross Mole serves the harbor with berths and cranes. Puffin Jetty serves the harbor with pilots and berths. "
    "Orchid Port hosts Lotus Logistics. Jade Campus trains engineers for Yingchuan Electronics in Suzhou.",
    "public/overview.txt")
FINANCE = _doc(
    "Project Cape carries flood insurance premiums in the quarterly ledger of Kestrel Bank. "
    "Project Cape books bond coupons against reserve accounts, hedges, swaps and escrow balances. "
    "Yingchuan Electronics pays flood insurance premiums through Kestrel Bank. "
    "Marlin Capital underwrites the flood bonds of Kestrel Bank. "
    "Tern Pier pledges its revenue as collateral for flood bonds, coupons, swaps, escrow, reserve tranches, "
    "annuities, debentures, warrants, rebates, levies and insurance premiums.",
    "finance/ledger.txt", groups=["finance"])
LEGAL = _doc(
    "Yingchuan Electronics faces a flood lawsuit from Delta Trading. "
    "Harbor Gate seeks an injunction against Lotus Logistics over flood liability, damages and arbitration. "
    "Vesper Law represents Harbor Gate in the injunction and the arbitration. "
    "Gull Pier settled a flood liability claim, waiver, indemnity and damages with Vesper Law.",
    "legal/claims.txt", groups=["legal"])
SURVEY = _doc(
    "Tern Pier commissioned a sonar survey of the silt in the channel. "
    "Nereid Survey ran the sonar survey for Orchid Port and Heron Dock.",
    "survey/sonar.txt", users=["uma"])
DOCS = (PUBLIC, FINANCE, LEGAL, SURVEY)

PRINCIPALS = {
    "outsider": Principal(user="outsider"),
    "finance": Principal(user="fiona", groups=frozenset({"finance"})),
    "legal": Principal(user="leo", groups=frozenset({"legal"})),
    "both": Principal(user="bea", groups=frozenset({"finance", "legal"})),
    "listed": Principal(user="uma"),
}
"""Every one may read ``PUBLIC``; none may read every document."""

QUESTIONS = (
    "flood",
    "Who pays flood insurance premiums for Project Cape?",
    "Which lawsuit and injunction involve Harbor Gate?",
    "What serves the harbor?",
    "sonar survey silt",
    "harbor dredgers",
    "Who buys boards from Yingchuan Electronics in Suzhou?",
)
"""Words only hidden documents hold, words every document holds, and both."""


def readable(principal: Principal) -> list[Document]:
    """The documents ``principal`` may read, without their lists, last first:
    an index of them inserts in another order than the full one, so that no
    tie may fall by insertion order."""
    return [d.model_copy(update={"access": None}) for d in reversed(DOCS) if allows(d.access, principal)]


def ranking(result: Mapping[str, Any]) -> dict[str, Any]:
    """What must agree with the readable-only index, from a ``QueryResult``
    dump or a server's JSON answer: every item in order with its degree, the
    chunks in order, the context and the answer. Scores apart (``scores``):
    they agree to float precision."""
    return {
        "entities": [(e["key"], e["degree"]) for e in result["entities"]],
        "relations": [(tuple(r["key"]), r["degree"]) for r in result["relations"]],
        "chunks": [c["id"] for c in result["chunks"]],
        "context": result["context"],
        "answer": result.get("answer"),
    }


def scores(result: Mapping[str, Any]) -> list[float]:
    return [float(x["score"] or 0.0) for x in (*result["entities"], *result["relations"])]

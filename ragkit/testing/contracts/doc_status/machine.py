"""The doc-status differential state machine: random doc-status operations
against the adapter and a dict (the shared rules, delete, drop, reopen and
the count invariant, are ``base.machine``'s; this kind's ``wrote`` hook checks
the generation)."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from ragkit.access import AccessList
from ragkit.errors import InvalidTransitionError
from ragkit.protocols.base import Capability
from ragkit.schema import ALLOWED_TRANSITIONS, DocStatus, DocStatusRecord
from ragkit.testing.contracts.base.machine import keyed_rules, run_machine
from ragkit.testing.contracts.doc_status.records import status_counts, record_diff, walk_pages


# Confusables too ([store.keys.exact]): case, NFC/NFD, ß/SS.
_ID_POOL = ["a", "B", "b", "doc-1", "中文", "🙂", "é", "e\u0301", "stra\u00dfe", "STRASSE"]
_IDS = st.sampled_from(_ID_POOL)
_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=8)
_WHEN = st.datetimes(
    min_value=datetime(1970, 1, 2), max_value=datetime(2200, 1, 1), timezones=st.just(timezone.utc)
)
_SCALAR = st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | _TEXT


_NAME = st.text(st.characters(categories=("L", "N", "P", "S")), min_size=1, max_size=12)
"""User and group names (``ragkit.access.check_name``: no control characters or surrounding space)."""


@st.composite
def _records(draw, id: str) -> DocStatusRecord:
    status = draw(st.sampled_from(list(DocStatus)))
    return DocStatusRecord(
        id=id,
        status=status,
        created_at=draw(_WHEN),
        updated_at=draw(_WHEN),
        error=draw(st.none() | _TEXT) if status is DocStatus.FAILED else None,
        chunk_ids=draw(st.lists(_TEXT, max_size=3)),
        content_hash=draw(_TEXT),
        file_path=draw(st.none() | _TEXT),
        content_length=draw(st.integers(0, 2**31)),
        metadata=draw(st.dictionaries(_TEXT, _SCALAR, max_size=3)),
        access=draw(st.none() | st.builds(AccessList, users=st.lists(_NAME, max_size=2),
                                          groups=st.lists(_NAME, max_size=2))),
    )


class DocStatusMachine(keyed_rules(_IDS, absent="never", delete_max=3)):
    """Random doc-status operations against the adapter and a dict."""

    def __init__(self) -> None:
        super().__init__()
        self.generation = self.run(self.store.generation())

    def wrote(self, changed: bool) -> None:
        """[doc_status.generation.every-write]: larger after a write that
        changed records, never smaller (also across drop and reopen)."""
        if Capability.GENERATION not in self.caps:
            return
        now = self.run(self.store.generation())
        assert isinstance(now, int) and (now > self.generation if changed else now >= self.generation), (
            f"generation {self.generation} -> {now} after a write{' that changed records' if changed else ''}"
        )
        self.generation = now

    def check_counts(self) -> None:
        assert self.run(self.store.counts()) == status_counts(self.model)

    @initialize(data=st.data(), ids=st.lists(_IDS, min_size=2, max_size=5, unique=True))
    def seed(self, data, ids):
        self.upsert(data, ids)  # start every example with data

    @rule(data=st.data(), ids=st.lists(_IDS, min_size=1, max_size=3, unique=True))
    def upsert(self, data, ids):
        recs = [data.draw(_records(i)) for i in ids]
        self.run(self.store.upsert(recs))
        for r in recs:
            self.model[r.id] = r.model_copy(deep=True)
        self.wrote(True)

    @rule(id=_IDS | st.just("never"), to=st.sampled_from(list(DocStatus)), error=st.none() | _TEXT)
    def transition(self, id, to, error):
        current = self.model.get(id)
        if current is None or to not in ALLOWED_TRANSITIONS[current.status]:
            with pytest.raises(InvalidTransitionError):
                self.run(self.store.transition(id, to, error=error))
            self.wrote(False)
            return
        out = self.run(self.store.transition(id, to, error=error))
        expected = current.model_copy(update={
            "status": to, "updated_at": out.updated_at, "error": error if to is DocStatus.FAILED else None,
        })
        diff = record_diff(expected, out)
        assert diff is None, f"transition({id!r}, {to}): {diff}"
        self.model[id] = out.model_copy(deep=True)
        self.wrote(True)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), to=st.sampled_from(list(DocStatus)), error=st.none() | _TEXT)
    def transition_existing(self, data, to, error):
        self.transition(data.draw(st.sampled_from(sorted(self.model)), label="existing id"), to, error)

    @rule(ids=st.lists(_IDS | st.just("never"), max_size=5))
    def get(self, ids):
        got = self.run(self.store.get(ids))
        assert len(got) == len(ids)
        for i, rec in zip(ids, got):
            diff = record_diff(self.model.get(i), rec)
            assert diff is None, f"get({i!r}): {diff}"

    @rule(status=st.none() | st.sampled_from(list(DocStatus)), limit=st.integers(1, 4))
    def page_through(self, status, limit):
        ids = self.run(walk_pages(self.store, status, limit))
        expected = sorted(i for i, r in self.model.items() if status is None or r.status == status)
        assert ids == expected, f"list_page({status}, limit={limit}) walk: {ids} != {expected}"


class DocStatusStateMachineTests:
    def test_differential_state_machine(self, adapter):
        """Random sequences of upserts (random statuses, timestamps, fields),
        transitions (allowed and refused), deletes, gets, full paging walks with
        random limits and status filters, drop and (if PERSISTENT) close/reopen
        agree with a dict; ``counts()`` compared after every step, and (if
        GENERATION) the generation larger after every write that changed
        records, never smaller.

        Troubleshoot: hypothesis prints the shortest failing step sequence;
        replay it against the adapter.
        """
        run_machine(DocStatusMachine, adapter)

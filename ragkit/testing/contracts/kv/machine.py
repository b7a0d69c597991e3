"""The KV differential state machine: random sequences of KV operations against
the adapter and a dict (the shared rules, delete, scan, drop, reopen and the
count invariant, are ``base.machine``'s)."""

from __future__ import annotations

import copy

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, precondition, rule

from ragkit.errors import InvalidValueError
from ragkit.testing.contracts.base.contract import difference
from ragkit.testing.contracts.base.machine import keyed_rules, run_machine


# Confusables too ([store.keys.exact]): case, NFC/NFD, ß/SS, final sigma.
_KEY_POOL = ["a", "b", "C", "c", "k-1", "中文", "🔑", "q'\"", "sp ace", "\u00e9", "e\u0301", "stra\u00dfe", "STRASSE", "\u03c3", "\u03c2"]
_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=12)
_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(-(2**53), 2**53)
    | st.floats(allow_nan=False, allow_infinity=False)
    | _TEXT
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=8,
)
# Field names overlap often, so replacing a record with one missing some of the
# old fields (the no-merge rule) comes up in most examples.
_RECORDS = st.dictionaries(st.sampled_from(["f", "g", "h"]) | _TEXT, _JSON, max_size=4)
_KEYS = st.sampled_from(_KEY_POOL)


class KVMachine(keyed_rules(_KEYS, absent="never-there", delete_max=4, scan="keys")):
    """Random sequences of KV operations against the adapter and a dict."""

    @initialize(batch=st.dictionaries(_KEYS, _RECORDS, min_size=2, max_size=5))
    def seed(self, batch):
        self.upsert(batch)  # start every example with data, so reads have something to get wrong

    @rule(batch=st.dictionaries(_KEYS, _RECORDS, min_size=1, max_size=4))
    def upsert(self, batch):
        self.run(self.store.upsert(batch))
        self.model.update(copy.deepcopy(batch))

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data(), record=_RECORDS)
    def replace(self, data, record):
        key = data.draw(st.sampled_from(sorted(self.model)), label="existing key")
        self.run(self.store.upsert({key: record}))
        self.model[key] = copy.deepcopy(record)
        diff = difference(record, self.run(self.store.get(key)))
        assert diff is None, f"after replacing {key!r}: {diff}"

    @rule(key=_KEYS, good=_RECORDS)
    def upsert_invalid_batch(self, key, good):
        with pytest.raises(InvalidValueError):
            self.run(self.store.upsert({key: good, "": {"bad": "empty key"}}))

    @rule(keys=st.lists(_KEYS | st.just("never-there"), max_size=6))
    def get_many(self, keys):
        got = self.run(self.store.get_many(keys))
        diff = difference([self.model.get(k) for k in keys], got)
        assert diff is None, f"get_many({keys!r}): {diff}"

    @rule(keys=st.lists(_KEYS, max_size=6))
    def missing(self, keys):
        assert self.run(self.store.missing(keys)) == {k for k in keys if k not in self.model}


class KVStateMachineTests:
    def test_differential_state_machine(self, adapter):
        """Random sequences of upsert (valid, invalid, replacing), delete, get_many,
        missing, keys, drop and (if PERSISTENT) close/reopen on a fresh store give
        the same observations as a plain dict; count is compared after every step.
        Budget: RAGKIT_CONTRACT_EXAMPLES x RAGKIT_CONTRACT_STEPS.

        Troubleshoot: hypothesis prints the shortest failing sequence of steps;
        replay it by hand against the adapter. The first differing observation
        names the operation that broke the protocol.
        """
        run_machine(KVMachine, adapter)

"""The codec and literals of ``ragkit_neo4j.cypher`` on their own (no server):
the exact stored form, names, the pieces long values are cut into, and the
binding of statement templates. What a server makes of them is tested in
``test_neo4j_graph.py``.

Troubleshoot: ``ragkit_neo4j/cypher.py``.
"""

from __future__ import annotations

import json

import pytest

from ragkit.errors import InvalidValueError
from ragkit_neo4j.cypher import (
    JSON_KEY,
    Binder,
    assemble,
    decode_properties,
    encode_properties,
    literal,
    quote_ident,
    split_value,
    store_label,
    string_literal,
)


def escaped(key: str) -> str:
    return "_ragkitx" + key.encode("utf-8").hex()


def test_the_stored_form_is_fixed_down_to_the_json_text():
    """Other processes (older versions too) read what is stored: user keys as
    given unless they clash with the adapter's own or hold a backtick or NUL;
    native values as given; the rest as compact ASCII JSON in one property."""
    props = {
        "plain": "v", "é": "ü", "t": True, "f": 0.5, "ints": [1, 2], "floats": [1.0, 2.5], "strs": ["a", "b"],
        "empty": [], "max": 2**63 - 1, "min": -(2**63),
        "_ragkit_id": "mine", "_ragkitx00": 1, "a`b": 2, "k\x00": 3,
        "mixed": [1, 2.5, "x"], "nul": "a\x00b", "past": 2**63, "below": -(2**63) - 1, "ints_str": [1, "1"],
        "text": "naïve",
    }
    stored = encode_properties(props)
    side = {"mixed": [1, 2.5, "x"], "nul": "a\x00b", "past": 2**63, "below": -(2**63) - 1, "ints_str": [1, "1"]}
    assert stored == {
        "plain": "v", "é": "ü", "t": True, "f": 0.5, "ints": [1, 2], "floats": [1.0, 2.5], "strs": ["a", "b"],
        "empty": [], "max": 2**63 - 1, "min": -(2**63), "text": "naïve",
        escaped("_ragkit_id"): "mine", escaped("_ragkitx00"): 1, escaped("a`b"): 2, escaped("k\x00"): 3,
        JSON_KEY: '{"mixed":[1,2.5,"x"],"nul":"a\\u0000b","past":9223372036854775808,'
                  '"below":-9223372036854775809,"ints_str":[1,"1"]}',
    }
    assert json.loads(stored[JSON_KEY]) == side
    assert decode_properties(stored) == props
    assert encode_properties({"ü": ["é", "\x00"]})[JSON_KEY] == '{"\\u00fc":["\\u00e9","\\u0000"]}'  # ASCII


def test_names_are_refused_with_what_is_wrong():
    for bad in ["", "a`b", "a\x00", "\x00"]:
        with pytest.raises(InvalidValueError, match=r"cannot be used as a Cypher name") as info:
            quote_ident(bad)
        assert repr(bad) in str(info.value)
    assert quote_ident("a b.c") == "`a b.c`"
    with pytest.raises(InvalidValueError, match=r"^label prefix 'a\.b' must match "):
        store_label("a.b", "w", "n")
    with pytest.raises(InvalidValueError, match=r"^workspace 'a b' must match "):
        store_label("ragkit", "a b", "n")
    with pytest.raises(InvalidValueError, match=r"^namespace 'a b' must match "):
        store_label("ragkit", "w", "a b")


def test_string_literals_escape_only_backslash_and_quote():
    assert string_literal("it's a \\ \"b\" `c` {d}\n") == "'it\\'s a \\\\ \"b\" `c` {d}\n'"
    with pytest.raises(InvalidValueError, match=r"^'" + "a" * 40 + r"' holds NUL"):
        string_literal("a" * 50 + "\x00")


def test_literals_of_each_kind():
    assert [literal(v) for v in (True, False, 0, -(2**63), 2**63 - 1, 0.5, "x")] == [
        "true", "false", "0", str(-(2**63)), str(2**63 - 1), "0.5", "'x'",
    ]
    assert literal(["a", 1, [2.5]]) == "['a', 1, [2.5]]" and literal(("a",)) == "['a']" and literal([]) == "[]"
    assert literal(5e-324) == f"({5e-324 * 2.0**600!r} * {2.0**-600!r})"
    assert literal(-0.0) == "-0.0" and literal(2.2250738585072014e-308) == "2.2250738585072014e-308"
    for bad in (2**63, -(2**63) - 1):
        with pytest.raises(InvalidValueError, match=rf"^{bad} does not fit a 64-bit integer"):
            literal(bad)
    with pytest.raises(InvalidValueError, match=r"^cannot write dict as a Cypher literal"):
        literal({})


def test_a_long_text_is_cut_into_as_few_pieces_as_fit():
    """Four bytes a character at most: pieces of ``limit // 4 - 2`` characters
    (at least one), each under the limit even for 4-byte characters."""
    text = "😀" * 100
    pieces = split_value(text, 62)
    assert [len(p) for p in pieces] == [13] * 7 + [9] and "".join(pieces) == text
    assert all(len(literal(p).encode("utf-8")) <= 62 for p in pieces)
    assert split_value("😀😀", 8) == ["😀", "😀"]  # a piece under 8 bytes holds one
    assert split_value("", 62) == [""]


def test_a_long_list_is_cut_where_the_next_item_would_pass_the_limit():
    """Each item costs its literal and a separator; a piece takes items while
    its count (2 for the brackets, then each item's cost) stays within ``limit``."""
    items = ["ab"] * 25  # each costs 4 + 2 bytes: 2 + 6k <= 62 holds for k <= 10
    pieces = split_value(items, 62)
    assert [len(p) for p in pieces] == [10, 10, 5]
    assert all(len(literal(p).encode("utf-8")) <= 62 for p in pieces)
    assert split_value([], 62) == [[]] and split_value(7, 62) == [7]


def test_pieces_are_assembled_in_index_order_skipping_empty_keys():
    text = "z" * 40 + "a" * 40
    pieces = split_value(text, 62)
    pairs = [(f"_ragkitp{i:06d}_k", p) for i, p in enumerate(pieces)][::-1]
    assert assemble([("x", 1), (None, 2), *pairs, ("y", 3)]) == {"x": 1, "k": text, "y": 3}
    listed = split_value([f"{9 - i}" for i in range(10)], 14)
    pairs = [(f"_ragkitp{i:06d}_l", p) for i, p in enumerate(listed)][::-1]
    assert assemble(pairs) == {"l": [f"{9 - i}" for i in range(10)]}


def test_binding_inline_or_as_parameters():
    inline, params = Binder(True), Binder(False)
    template = "MATCH (n {id: $id}) SET n.x = $x RETURN $id"
    assert inline.bind(template, id="a'b", x=[1, 2]) == ("MATCH (n {id: 'a\\'b'}) SET n.x = [1, 2] RETURN 'a\\'b'", {})
    assert params.bind(template, id="a'b", x=[1, 2]) == (template, {"id": "a'b", "x": [1, 2]})
    with pytest.raises(KeyError, match=r"no value for \$x in 'MATCH"):
        params.bind(template, id="a")
    with pytest.raises(KeyError, match=r"values \['y', 'z'\] unused by 'MATCH"):
        inline.bind(template, id="a", x=1, y=2, z=3)
    assert inline.size("ab") == len("'ab'") + 2 and inline.size([1, 22]) == len("[1, 22]") + 2
    assert params.size("ab") == 0

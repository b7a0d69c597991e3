"""Everything that turns ragkit values into Cypher text or query parameters.

- **Names.** Labels, relationship types and property keys cannot be query
  parameters. The store's label is built from the workspace and namespace
  (already validated by ``StoreConfig``) after checking them again against a
  strict whitelist, joined with ``.`` (a character names cannot contain, so two
  different (workspace, namespace) pairs never share a label) and always
  backtick-quoted. ``quote_ident`` refuses anything holding a backtick or NUL.

- **Property codec** (one stored form for every server). A node keeps its id in
  ``_ragkit_id``; user keys are stored as given, except keys that start with
  ``_ragkit`` or hold a backtick/NUL, stored as ``_ragkitx<utf-8 hex>``. Values
  a property cannot hold natively (mixed-type lists, which Neo4j refuses; text
  with NUL; ints beyond 64 bits) go, JSON-encoded, into one ``_ragkit_json``
  property. Decoding reverses both exactly. Lone surrogates never get here: the
  graph protocol refuses them in what is written and skips them in what is read
  ([graph.text.unicode]).

- **Values.** With a real Neo4j every value travels as a query parameter.
  FalkorDB's Bolt listener (the test stand-in) has no parameters of its own: it
  pastes them into the query text unescaped, into a 4 KB stack buffer (a quote
  in a value breaks the query, anything over 4 KB crashes the server, floats
  lose digits). For such a server the adapter renders values as Cypher literals
  itself, escaped (``literal``), and never sends parameters. ``Binder`` is the
  one place that chooses.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from typing import Any

from ragkit.errors import InvalidValueError

ID_KEY = "_ragkit_id"
JSON_KEY = "_ragkit_json"
_RESERVED = "_ragkit"
_ESCAPED = "_ragkitx"
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

STORE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_\-]{0,63}$")
"""Workspace and namespace names (the same rule as ``StoreConfig``)."""
IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,63}$")
"""Label prefixes and relationship types given in options."""


# -- names ---------------------------------------------------------------------


def quote_ident(name: str) -> str:
    """``name`` as a backtick-quoted Cypher identifier. Names holding a backtick
    or NUL are refused: the codec never produces them, and FalkorDB cannot
    escape a backtick inside one."""
    if not isinstance(name, str) or not name or "`" in name or "\x00" in name:
        raise InvalidValueError(f"{name!r} cannot be used as a Cypher name")
    return f"`{name}`"


def store_label(prefix: str, workspace: str, namespace: str) -> str:
    """The label of one store's nodes, e.g. ``ragkit.team-a.chunk_entity``
    (unquoted; pass it through ``quote_ident``)."""
    if not IDENT.fullmatch(prefix):
        raise InvalidValueError(f"label prefix {prefix!r} must match {IDENT.pattern}")
    for what, value in (("workspace", workspace), ("namespace", namespace)):
        if not STORE_NAME.fullmatch(value):
            raise InvalidValueError(f"{what} {value!r} must match {STORE_NAME.pattern}")
    return f"{prefix}.{workspace}.{namespace}"


# -- property codec ----------------------------------------------------------------


def storable_text(text: str) -> bool:
    """Text every supported server stores unchanged: no NUL (valid Unicode it
    is already, see the module's doc)."""
    return "\x00" not in text


def encode_key(key: str) -> str:
    if key.startswith(_RESERVED) or "`" in key or not storable_text(key):
        return _ESCAPED + key.encode().hex()
    return key


def decode_key(key: str) -> str | None:
    """The user's key, or ``None`` for the adapter's own properties."""
    if key.startswith(_ESCAPED):
        return bytes.fromhex(key[len(_ESCAPED):]).decode()
    if key.startswith(_RESERVED):
        return None
    return key


def _scalar_kind(value: Any) -> str | None:
    """``str``/``int``/``float``/``bool`` when a property stores it natively."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int" if INT64_MIN <= value <= INT64_MAX else None
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "str" if storable_text(value) else None
    return None


def _native(value: Any) -> bool:
    if isinstance(value, list):
        kinds = {_scalar_kind(v) for v in value}
        return len(kinds) <= 1 and None not in kinds  # homogeneous (or empty)
    return _scalar_kind(value) is not None


def encode_properties(props: Mapping[str, Any]) -> dict[str, Any]:
    """Checked ragkit properties -> the stored property map (see module doc)."""
    out: dict[str, Any] = {}
    side: dict[str, Any] = {}
    for key, value in props.items():
        if _native(value):
            out[encode_key(key)] = list(value) if isinstance(value, list) else value
        else:
            side[key] = value
    if side:
        out[JSON_KEY] = json.dumps(side, ensure_ascii=True, allow_nan=False, separators=(",", ":"))
    return out


_PIECE = "_ragkitp"


def piece_key(index: int, stored_key: str) -> str:
    """Where piece ``index`` of a value split for a server with small messages lives."""
    return f"{_PIECE}{index:06d}_{stored_key}"


def split_value(value: Any, limit: int) -> list[Any]:
    """``value`` cut into pieces whose literals stay under ``limit`` bytes
    (strings by characters, lists by items); concatenating them gives it back."""
    if isinstance(value, str):
        step = max(1, limit // 4 - 2)  # a character takes at most 4 bytes
        return [value[i:i + step] for i in range(0, len(value), step)] or [""]
    if isinstance(value, list):
        pieces: list[Any] = [[]]
        size = 2
        for item in value:
            cost = len(literal(item).encode("utf-8")) + 2
            if pieces[-1] and size + cost > limit:
                pieces.append([])
                size = 2
            pieces[-1].append(item)
            size += cost
        return pieces
    return [value]


def assemble(pairs: Any) -> dict[str, Any]:
    """The stored property map from (key, value) pairs, pieces joined again."""
    stored: dict[str, Any] = {}
    pieces: dict[str, list[tuple[int, Any]]] = {}
    for key, value in pairs:
        if key is None:
            continue
        if key.startswith(_PIECE):
            pieces.setdefault(key[len(_PIECE) + 7:], []).append((int(key[len(_PIECE):len(_PIECE) + 6]), value))
        else:
            stored[key] = value
    for key, parts in pieces.items():
        parts.sort(key=lambda p: p[0])
        first = parts[0][1]
        if isinstance(first, str):
            stored[key] = "".join(p for _, p in parts)
        else:
            stored[key] = [item for _, p in parts for item in p]
    return stored


def decode_properties(stored: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in stored.items():
        name = decode_key(key)
        if name is not None:
            out[name] = value
    side = stored.get(JSON_KEY)
    if isinstance(side, str):
        out.update(json.loads(side))
    return out


# -- literals (servers without real parameters) ---------------------------------------------

_MIN_NORMAL = sys.float_info.min
_SCALE = 2.0**600


def string_literal(text: str) -> str:
    """A single-quoted Cypher string: backslash and quote escaped, everything
    else verbatim (Neo4j and FalkorDB both read raw newlines, quotes of the other
    kind, backticks and braces inside a string)."""
    if not storable_text(text):
        raise InvalidValueError(
            f"{text[:40]!r} holds NUL, which this server cannot store"
        )
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def float_literal(value: float) -> str:
    """``repr`` (shortest exact form); subnormals as an exact product, because
    FalkorDB's parser refuses literals below the smallest normal float."""
    if value != 0.0 and abs(value) < _MIN_NORMAL:
        return f"({value * _SCALE!r} * {1 / _SCALE!r})"
    return repr(value)


def literal(value: Any) -> str:
    """A Cypher literal for a value of the codec's output (or an id/row list)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if not INT64_MIN <= value <= INT64_MAX:
            raise InvalidValueError(f"{value} does not fit a 64-bit integer")
        return str(value)
    if isinstance(value, float):
        return float_literal(value)
    if isinstance(value, str):
        return string_literal(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    raise InvalidValueError(f"cannot write {type(value).__name__} as a Cypher literal")


_PLACEHOLDER = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)")


class Binder:
    """Fills ``$name`` placeholders of a statement template: kept as query
    parameters (``inline=False``) or replaced by escaped literals.

    Templates are the adapter's own text with quoted labels only (never user
    text); property names are appended after binding, so a ``$`` inside one is
    never taken for a placeholder.
    """

    def __init__(self, inline: bool) -> None:
        self.inline = inline

    def bind(self, template: str, **values: Any) -> tuple[str, dict[str, Any]]:
        used: set[str] = set()

        def fill(match: re.Match[str]) -> str:
            name = match.group(1)
            if name not in values:
                raise KeyError(f"no value for ${name} in {template!r}")
            used.add(name)
            return literal(values[name]) if self.inline else match.group(0)

        text = _PLACEHOLDER.sub(fill, template)
        if set(values) - used:
            raise KeyError(f"values {sorted(set(values) - used)} unused by {template!r}")
        return text, ({} if self.inline else {k: values[k] for k in used})

    def size(self, value: Any) -> int:
        """Bytes ``value`` adds to a statement (0 when sent as a parameter)."""
        return len(literal(value).encode("utf-8")) + 2 if self.inline else 0

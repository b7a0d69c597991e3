"""Reading an extraction answer: untrusted model text in, entities and relations out.

``parse_extraction`` never raises on a ``str``. What it cannot use it drops and
counts (``dropped``), saying why in ``warnings`` (at most ``MAX_WARNINGS`` lines).

Accepted besides the asked format (``ragkit.core.prompts``):

- prose before, between or after the rows (lines without a field delimiter),
  code fences, a missing ``<|COMPLETE|>``, blank lines, ``\\r\\n`` line ends;
- the kind in any case, quoted, bulleted or numbered (``1. "Entity"<|#|>...``),
  and ``relationship`` for ``relation``; LightRAG's older tuple rows
  ``("entity"<|>Name<|>Type<|>desc)##`` (whose relations put the description
  before the keywords) and its ``content_keywords`` rows (ignored);
- whitespace around fields and one pair of double quotes, backticks or curly
  double quotes around a field. Single quotes are kept: names begin and end with
  apostrophes ("Only My Heart Talkin'", "'Til Tuesday");
- JSON instead of rows, alone or inside prose or a code fence:
  ``{"entities": [...], "relations": [...]}`` or a list of records (common key
  synonyms accepted, e.g. ``entity_name``, ``src_id``, ``weight``).

Rules:

- Every field is made storable (``ragkit.core.text.clean``: lone surrogates
  become U+FFFD, NUL and other C0 controls but tab and line breaks are
  removed), also after JSON decoding, which can produce them from escapes.
- Names and other fields are kept as written, trimmed; merging mentions by
  normalised name is the caller's job. Exact duplicate rows are kept once.
- Dropped rows: fewer fields than the kind needs (entity 4, relation 5; a short
  final row with no ``<|COMPLETE|>`` is reported as truncated), an empty name, a
  name made only of punctuation (symbols such as ``$`` are names), a name longer
  than ``MAX_NAME_CHARS`` as written or once normalised (NFKC can expand it), a relation whose ends have the same normalised name
  (a self-loop says nothing a graph can use), an echo of the template.
- Repaired rows: extra fields join the description (a trailing number is taken
  as the strength); an empty or over-long type becomes ``entity``; descriptions
  and keywords are cut at their limits; a strength that is not a number is 1.0,
  and numbers are clamped to [0, ``MAX_STRENGTH``].
- A final row cut short by a length limit but still holding all its fields is
  kept (it cannot be told apart); a dangling partial delimiter is removed from it.
- Every relation endpoint with no entity of the same normalised name gets one:
  type ``entity``, empty description (the relation is its only evidence).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from typing import Any

from pydantic import BaseModel, Field

from ragkit.core import text as storable
from ragkit.core.text import MAX_NAME_CHARS
from ragkit.ids import normalize_name
from ragkit.schema import Entity, Relation

MAX_TYPE_CHARS = 64
MAX_KEYWORDS_CHARS = 500
MAX_DESCRIPTION_CHARS = 4000
MAX_STRENGTH = 10.0
DEFAULT_STRENGTH = 1.0
MAX_WARNINGS = 20
_JSON_ATTEMPTS = 5  # bracket positions tried; bounds the work on bracket-heavy prose

_COMPLETE = re.compile(r"<\|\s*complete\s*\|>", re.IGNORECASE)
_DELIMITER = re.compile(r"<\|#\|>|<\|>")
_NEWLINE = re.compile(r"\r\n|\r|\n")
_FENCE = re.compile(r"^`{3,}|`{3,}$")
_KIND = re.compile(r"\b(entity|relationship|relation|content_keywords)\W*$")
_PARTIAL_TAIL = re.compile(r"(<\|[#A-Za-z]*\|?|<)$")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_QUOTE_PAIRS = {'"': '"', "`": "`", "\u201c": "\u201d"}
_TEMPLATE_ECHOES = {("entity_name", "entity_type"), ("source_entity", "target_entity")}


class ParsedExtraction(BaseModel):
    entities: list[Entity] = Field(default_factory=list)
    relations: list[Relation] = Field(default_factory=list)
    """``source_ids`` are empty: the caller knows the chunk."""
    dropped: int = 0
    """Rows (or JSON records) that could not be used."""
    warnings: list[str] = Field(default_factory=list)
    complete: bool = False
    """The answer carried ``<|COMPLETE|>``."""


def parse_extraction(text: str) -> ParsedExtraction:
    # Lone surrogates would break every later UTF-8 encode, ids included; NUL
    # and other controls are refused by some stores (``ragkit.core.text``).
    text = storable.clean(text)
    out = _ExtractionRecords()
    out.complete = bool(_COMPLETE.search(text))
    body = _COMPLETE.sub("\n", text)
    if _DELIMITER.search(body):
        _parse_rows(body, out)
    elif not _parse_json(body, out) and body.strip() and not out.complete:
        out.warn("no extraction rows found in the answer")
    if not out.complete and (out.entities or out.relations) and not out.from_json:
        out.warn("no <|COMPLETE|> marker: the answer may be truncated")
    return out.result()


# --- rows ----------------------------------------------------------------------


def _parse_rows(body: str, out: _ExtractionRecords) -> None:
    records: list[tuple[list[str], bool]] = []
    for line in _NEWLINE.split(body):
        line = _FENCE.sub("", line.strip()).strip()
        if not _DELIMITER.search(line):
            continue  # prose, fences, blank lines
        if "<|#|>" in line:
            records.append((line.split("<|#|>"), False))
            continue
        # Older tuple rows: ("kind"<|>a<|>b)## possibly several on one line.
        for part in re.split(r"\)\s*##", line):
            part = part.strip().removesuffix("##").strip().removeprefix("(").removesuffix(")")
            if part:
                records.append((part.split("<|>"), True))
    for number, (fields, legacy) in enumerate(records, 1):
        final_cut = number == len(records) and not out.complete
        if final_cut:
            fields[-1] = _PARTIAL_TAIL.sub("", fields[-1].rstrip())
        _read_row(fields, legacy, f"row {number}", out, final_cut)


def _read_row(
    fields: list[str], legacy: bool, where: str, out: _ExtractionRecords, final_cut: bool = False
) -> None:
    match = _KIND.search(_clean(fields[0]).casefold())
    if match is None:
        out.drop(f"{where}: unknown row kind {_snippet(fields[0])}")
        return
    kind = match.group(1)
    if kind == "content_keywords":
        return
    needed = 4 if kind == "entity" else 5
    if len(fields) < needed:
        why = f"has {len(fields)} fields, needs {needed}"
        if final_cut:
            why = "looks truncated (no <|COMPLETE|> after it)"
        out.drop(f"{where}: {kind} row {why}: {_snippet('<|#|>'.join(fields))}")
        return
    while len(fields) > needed and not _clean(fields[-1]):
        fields = fields[:-1]  # a trailing delimiter
    if kind == "entity":
        extra = [f for f in fields[4:] if _number(f) is None]
        out.entity(fields[1], fields[2], _joined([fields[3], *extra]), where)
        return
    payload = fields[3:]
    strength: str | None = None
    if len(payload) > 3 and _number(payload[-1]) is not None:
        strength, payload = payload[-1], payload[:-1]
    elif len(payload) == 3:
        strength, payload = payload[2], payload[:2]
    first, second, *extra = payload
    keywords, description = (second, first) if legacy else (first, second)
    out.relation(fields[1], fields[2], keywords, _joined([description, *extra]), strength, where)


# --- JSON ----------------------------------------------------------------------

_NAME_KEYS = ("name", "entity_name", "entity", "title")
_TYPE_KEYS = ("type", "entity_type", "category", "label")
_DESCRIPTION_KEYS = ("description", "entity_description", "relationship_description", "desc", "summary")
_SOURCE_KEYS = ("source", "src", "source_entity", "src_id", "head", "subject", "from")
_TARGET_KEYS = ("target", "tgt", "target_entity", "tgt_id", "tail", "object", "to")
_KEYWORD_KEYS = (
    "keywords", "relationship_keywords", "relation", "relationship", "predicate", "type", "label",
)
_STRENGTH_KEYS = ("strength", "weight", "relationship_strength", "score")


def _parse_json(body: str, out: _ExtractionRecords) -> bool:
    """Reads the first JSON value found in ``body``; False when there is none."""
    decoder = json.JSONDecoder()
    for attempt, match in enumerate(re.finditer(r"[\[{]", body)):
        if attempt == _JSON_ATTEMPTS:
            break
        try:
            value, _ = decoder.raw_decode(body, match.start())
        except (ValueError, RecursionError):
            continue
        if not _looks_like_extraction(value):
            continue
        out.from_json = True
        for number, record in enumerate(_json_records(value), 1):
            _read_json_record(record, f"JSON record {number}", out)
        return True
    return False


def _looks_like_extraction(value: Any) -> bool:
    """Skips bracketed prose that happens to be JSON, like "[1]"."""
    if isinstance(value, dict):
        return True
    if not isinstance(value, list):
        return False
    return not value or any(isinstance(x, (dict, list)) for x in value) or _is_flat_row(value)


def _is_flat_row(value: list[Any]) -> bool:
    return bool(value) and isinstance(value[0], str) and all(_is_scalar(x) for x in value) and bool(
        _KIND.search(_clean(value[0]).casefold())
    )


def _json_records(value: Any) -> list[Any]:
    if isinstance(value, list):
        return [value] if _is_flat_row(value) else value
    if not isinstance(value, dict):
        return [value]
    keys = {str(k).casefold(): v for k, v in value.items()}
    groups = [keys.get(k) for k in ("entities", "nodes", "relations", "relationships", "edges")]
    lists = [g for g in groups if isinstance(g, list)]
    return [item for group in lists for item in group] if lists else [value]


def _read_json_record(record: Any, where: str, out: _ExtractionRecords) -> None:
    if isinstance(record, list) and record and all(_is_scalar(x) for x in record):
        _read_row([_text(x) for x in record], False, where, out)
        return
    if not isinstance(record, dict):
        out.drop(f"{where}: not an object: {_snippet(repr(record))}")
        return
    keys = {str(k).casefold(): v for k, v in record.items()}

    def get(names: tuple[str, ...]) -> Any:
        return next((keys[n] for n in names if n in keys), None)

    source, target = get(_SOURCE_KEYS), get(_TARGET_KEYS)
    if source is not None and target is not None:
        strength = get(_STRENGTH_KEYS)
        out.relation(
            _text(source), _text(target), _text(get(_KEYWORD_KEYS)), _text(get(_DESCRIPTION_KEYS)),
            None if strength is None else _text(strength), where,
        )
    elif get(_NAME_KEYS) is not None:
        out.entity(_text(get(_NAME_KEYS)), _text(get(_TYPE_KEYS)), _text(get(_DESCRIPTION_KEYS)), where)
    else:
        out.drop(f"{where}: neither an entity nor a relation: {_snippet(repr(record))}")


def _is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float))


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ", ".join(_text(v) for v in value if _is_scalar(v) and v is not None)
    if isinstance(value, dict):
        return ""
    return str(value)


# --- shared checks ---------------------------------------------------------------


class _ExtractionRecords:
    """Collects checked records; one place for the rules both syntaxes share."""

    def __init__(self) -> None:
        self.entities: list[Entity] = []
        self.relations: list[Relation] = []
        self.dropped = 0
        self.duplicates = 0
        self.complete = False
        self.from_json = False
        self._warnings: list[str] = []
        self._unsaid = 0
        self._seen: set[tuple[str | float, ...]] = set()

    def warn(self, message: str) -> None:
        if len(self._warnings) < MAX_WARNINGS:
            self._warnings.append(message)
        else:
            self._unsaid += 1

    def drop(self, message: str) -> None:
        self.dropped += 1
        self.warn(message)

    def entity(self, name: str, type_: str, description: str, where: str) -> None:
        name, type_ = _clean(name), _clean(type_)
        problem = _name_problem(name)
        if problem or (name.casefold(), type_.casefold()) in _TEMPLATE_ECHOES:
            self.drop(f"{where}: entity dropped: {problem or 'template echo'}")
            return
        if len(type_) > MAX_TYPE_CHARS:
            self.warn(f"{where}: type longer than {MAX_TYPE_CHARS} characters replaced by 'entity'")
            type_ = ""
        type_ = type_ or "entity"
        description = self._cut(_clean(description), MAX_DESCRIPTION_CHARS, "description", where)
        if self._first(("e", name, type_, description)):
            self.entities.append(Entity(name=name, type=type_, description=description))

    def relation(
        self, source: str, target: str, keywords: str, description: str, strength: str | None, where: str
    ) -> None:
        source, target = _clean(source), _clean(target)
        problem = _name_problem(source) or _name_problem(target)
        if not problem and normalize_name(source) == normalize_name(target):
            problem = f"source and target are the same entity {_snippet(source)}"
        if not problem and (source.casefold(), target.casefold()) in _TEMPLATE_ECHOES:
            problem = "template echo"
        if problem:
            self.drop(f"{where}: relation dropped: {problem}")
            return
        keywords = self._cut(_clean(keywords), MAX_KEYWORDS_CHARS, "keywords", where)
        description = self._cut(_clean(description), MAX_DESCRIPTION_CHARS, "description", where)
        weight = self._strength(strength, where)
        if self._first(("r", source, target, keywords, description, weight)):
            self.relations.append(Relation(
                source=source, target=target, keywords=keywords, description=description, strength=weight
            ))

    def result(self) -> ParsedExtraction:
        known = {normalize_name(e.name) for e in self.entities}
        implicit: list[Entity] = []
        for rel in self.relations:
            for name in (rel.source, rel.target):
                if normalize_name(name) not in known:
                    known.add(normalize_name(name))
                    implicit.append(Entity(name=name))
        warnings = list(self._warnings)
        if self._unsaid:
            warnings.append(f"... and {self._unsaid} more warnings")
        if self.duplicates:
            warnings.append(f"{self.duplicates} duplicate rows ignored")
        return ParsedExtraction(
            entities=self.entities + implicit,
            relations=self.relations,
            dropped=self.dropped,
            warnings=warnings,
            complete=self.complete,
        )

    def _first(self, key: tuple[str | float, ...]) -> bool:
        if key in self._seen:
            self.duplicates += 1
            return False
        self._seen.add(key)
        return True

    def _cut(self, value: str, limit: int, what: str, where: str) -> str:
        if len(value) <= limit:
            return value
        self.warn(f"{where}: {what} cut to {limit} characters")
        return value[:limit].rstrip()

    def _strength(self, text: str | None, where: str) -> float:
        if text is None or not text.strip():
            return DEFAULT_STRENGTH
        value = _number(text)
        if value is None:
            self.warn(f"{where}: strength {_snippet(text)} is not a number; using {DEFAULT_STRENGTH}")
            return DEFAULT_STRENGTH
        clamped = min(max(value, 0.0), MAX_STRENGTH)
        if clamped != value:
            self.warn(f"{where}: strength {_snippet(text)} clamped to {clamped}")
        return clamped


def _clean(field: str) -> str:
    """Trimmed, line breaks folded, one pair of surrounding quotes removed, and
    storable: JSON escapes (``\\ud800``, ``\\u0000``) are decoded only after the
    whole answer was cleaned, so every field is cleaned again."""
    field = storable.clean(field)
    text = " ".join(part.strip() for part in _NEWLINE.split(field)).strip()
    if len(text) >= 2 and _QUOTE_PAIRS.get(text[0]) == text[-1]:
        text = text[1:-1].strip()
    return text


def _joined(fields: list[str]) -> str:
    return " ".join(text for text in map(_clean, fields) if text)


def _name_problem(name: str) -> str | None:
    if not name:
        return "empty name"
    # Both as written and as the entity key: NFKC can multiply the length
    # (U+FDFA is 18 characters), and the key is what stores index.
    problem = storable.name_problem(name)
    if problem:
        return f"{problem} {_snippet(name)}"
    # Categories P (punctuation), Z (separators) and C (controls): no letter,
    # digit, mark or symbol, so nothing to name.
    if all(unicodedata.category(ch)[0] in "PZC" for ch in name):
        return f"name is only punctuation {_snippet(name)}"
    return None


def _number(text: str) -> float | None:
    """A finite-or-infinite float from a strength field, or None (also for NaN)."""
    text = _clean(text)
    try:
        value = float(text)
    except ValueError:
        # "8/10", "strength: 7"; only short fields, so prose is never a number.
        found = _NUMBER.search(text) if len(text) <= 24 else None
        value = float(found.group()) if found else math.nan
    return None if math.isnan(value) else value


def _snippet(text: str, width: int = 60) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= width else text[: width - 1] + "…")

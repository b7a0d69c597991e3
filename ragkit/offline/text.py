"""Text rules shared by the offline LLM: sentences, words, stems, dates, Chinese tokens.

Everything here is deterministic and needs no model file beyond jieba's
dictionary, which ships inside the jieba package (loaded on first Chinese text).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache

# The word rules live in ragkit.words (lexical search shares them); re-exported here.
from ragkit.words import STOP, ZH_STOP, base_word, stem  # noqa: F401
from ragkit.words import jieba_posseg as _jieba

MAX_SENTENCE_CHARS = 600
"""Longer "sentences" (tables, lists without punctuation) are cut into pieces."""

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_LETTERS = "0-9A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u0370-\u03ff\u0400-\u04ff\u1e00-\u1eff"
LATIN_WORD = re.compile(f"[{_LETTERS}]+(?:[-'\u2019&.][{_LETTERS}]+)*")
"""A word of an alphabetic script: "CB-7", "Yingchuan's", "U.S", "2025-03-03"."""
LATIN_CHAR = f"[{_LETTERS}]"

_HEADING = re.compile(r"^#{1,6}\s+(.*?)[\s#]*$")
_BULLET = re.compile(r"^(?:[-*+\u2022]|\d{1,3}[.)])\s+")
_QUOTE = re.compile(r"^>+\s?")
_FENCE = re.compile(r"^(`{3,}|~{3,})")
_TABLE_RULE = re.compile(r"^\|?[\s:|-]+\|?$")
_EMPHASIS = re.compile(r"\*\*|__|`+")
_LATIN_END = re.compile(r"[.!?]+[\"'\u201d\u2019)\]]*\s+")
_CJK_END = re.compile(r"[\u3002\uff01\uff1f!?]+[\u201d\u2019\u300d\u300f\uff09)]*")
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st mt inc ltd co corp no vs etc e.g i.e fig approx dept est jan feb mar apr "
    "jun jul aug sep sept oct nov dec gen col lt sgt capt rev".split()
)


@dataclass(frozen=True)
class Sentence:
    text: str
    heading: bool = False


@dataclass
class Candidate:
    """A name found by the rules (either language) and the evidence for its kind."""

    name: str
    structural: str | None = None
    """A kind the name's own form shows ("Project X", "X Electronics", "X公司")."""
    votes: Counter[str] = field(default_factory=Counter)
    """Kinds suggested by the words around its mentions."""

    def kind(self) -> str:
        if self.structural:
            return self.structural
        if self.votes["person"]:
            return "person"
        if self.votes["location"]:
            return "location"
        return max(sorted(self.votes), key=lambda k: self.votes[k]) if self.votes else "other"


def has_cjk(text: str) -> bool:
    return _CJK.search(text) is not None


def is_cjk_char(ch: str) -> bool:
    return _CJK.match(ch) is not None


def one_line(text: str) -> str:
    """Whitespace folded to single spaces and the row delimiters made harmless,
    so the text can sit in one field of an extraction row."""
    text = " ".join(text.split())
    return text.replace("<|", "<")


# --- sentences ----------------------------------------------------------------------


def split_sentences(text: str) -> list[Sentence]:
    """Markdown-aware sentences: headings apart, bullets and table rows as blocks,
    wrapped lines joined, then split at sentence ends (English and Chinese)."""
    out: list[Sentence] = []
    for block, heading in _blocks(text):
        if heading:
            out.append(Sentence(block, heading=True))
            continue
        out += [Sentence(s) for s in _split_block(block)]
    return out


def _blocks(text: str) -> list[tuple[str, bool]]:
    blocks: list[tuple[str, bool]] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            blocks.append((_join_lines(current), False))
            current.clear()

    for raw in text.splitlines():
        line = _QUOTE.sub("", raw.strip()).strip()
        heading = _HEADING.match(line)
        if not line or _FENCE.match(line) or _TABLE_RULE.match(line):
            flush()
        elif heading:
            flush()
            if heading.group(1).strip():
                blocks.append((_EMPHASIS.sub("", heading.group(1)).strip(), True))
        elif _BULLET.match(line) or line.startswith("|"):
            flush()
            current.append(_BULLET.sub("", line).strip("| ").replace(" | ", "; "))
        else:
            current.append(line)
    flush()
    return [(" ".join(b.split()), h) for b, h in blocks if b.strip()]


def _join_lines(lines: list[str]) -> str:
    out = lines[0]
    for line in lines[1:]:
        glue = "" if out and line and is_cjk_char(out[-1]) and is_cjk_char(line[0]) else " "
        out += glue + line
    return _EMPHASIS.sub("", out)


def _split_block(block: str) -> list[str]:
    pieces: list[str] = []
    start = 0
    for end in sorted(set(_latin_ends(block)) | {m.end() for m in _CJK_END.finditer(block)}):
        if end > start:
            pieces.append(block[start:end])
            start = end
    pieces.append(block[start:])
    out: list[str] = []
    for piece in pieces:
        out += _cut_long(piece.strip())
    return [p for p in out if p]


def _latin_ends(block: str) -> list[int]:
    ends = []
    for match in _LATIN_END.finditer(block):
        before = block[: match.start()].rsplit(None, 1)[-1] if block[: match.start()].strip() else ""
        word = before.lstrip("([\"'").casefold()
        nxt = block[match.end(): match.end() + 1]
        if match.group().startswith(".") and (word in _ABBREVIATIONS or (len(word) == 1 and word.isalpha())):
            continue  # "Dr. Gu", "J. Smith"
        if nxt and nxt.islower():
            continue  # "e.g. the", "approx. three"
        ends.append(match.end())
    return ends


def _cut_long(sentence: str) -> list[str]:
    out = []
    while len(sentence) > MAX_SENTENCE_CHARS:
        cut = max(sentence.rfind(sep, 0, MAX_SENTENCE_CHARS) for sep in (" ", "\uff0c", ","))
        cut = cut if cut > MAX_SENTENCE_CHARS // 2 else MAX_SENTENCE_CHARS
        out.append(sentence[: cut + 1].strip())
        sentence = sentence[cut + 1:].strip()
    return [*out, sentence] if sentence else out


# --- English words ------------------------------------------------------------------

DATE_WORDS = frozenset(
    """january february march april may june july august september october november december jan feb mar
    apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday mon tue
    wed thu fri sat sun spring summer autumn fall winter week weeks month months year years day days
    quarter q1 q2 q3 q4 h1 h2 am pm utc gmt""".split()
)

COMMON = frozenset(
    """project projects programme program supplier suppliers customer customers client clients team teams
    board boards company companies group office site plant factory line delivery deliveries integration
    testing test tests production procurement purchasing quality status summary overview background update
    updates report reports meeting meetings minutes agenda action actions decision decisions risk risks
    issue issues plan plans planning schedule budget cost costs price prices order orders review reviews
    audit audits result results owner owners lead leads manager managers engineer engineers director
    head staff member members people person user users product products service services system systems
    data model models part parts unit units batch batches sample samples field trial trials pilot contract
    contracts invoice invoices payment payments shipment shipments stock inventory demand supply sales
    market markets question questions answer answers problem problems solution solutions goal goals
    target targets task tasks work job jobs step steps phase phases stage stages version release draft
    final total other others general special main key important current previous following above below
    early late earlier latest first last next new old good bad high low big small large full half
    internal external local global national international north south east west central spare backup
    weekly monthly daily annual yearly our your their its his her introduction conclusion conclusions
    context contents content description details detail information info comment comments feedback
    approval approvals request requests response responses support training design development research
    engineering operations finance legal marketing management leadership hardware software firmware""".split()
)
"""Common words that start sentences or headings capitalised: not a name on
their own at a sentence start, but fine inside a longer name."""

PROJECT_PREFIX = frozenset("project programme program operation initiative mission campaign".split())
ORG_SUFFIX = frozenset(
    """inc inc. ltd ltd. llc llp plc gmbh ag sa sas spa bv nv kk co co. corp corp. corporation company
    group holdings partners electronics circuits sensors systems technologies technology tech industries
    industrial labs laboratories university college institute school academy bank agency authority
    ministry department bureau council commission committee foundation association society union
    hospital clinic castings logistics manufacturing motors semiconductor semiconductors devices
    components solutions software networks communications media pharma pharmaceuticals energy power
    airlines railways press studios ventures capital fund trust""".split()
)
HONORIFICS = frozenset("mr mrs ms miss dr prof sir dame madam mx".split())
ROLE_WORDS = frozenset(
    """manager engineer director lead leader head officer ceo cto cfo coo president vice chairman chair
    chairwoman founder minister professor researcher analyst buyer planner designer developer architect
    inspector auditor supervisor secretary coordinator spokesperson spokesman spokeswoman colleague
    colleagues owner representative rep consultant specialist technician chemist scientist doctor
    nurse teacher student""".split()
)
COMMON_SUFFIXES = (
    "ing", "ed", "ly", "tion", "tions", "sion", "ment", "ments", "ness", "ity", "ance", "ence", "ies",
    "ous", "ful", "ive", "ives", "able", "ible", "ship", "ism", "ist", "ists", "ize", "ise",
)
CONNECTORS = frozenset("of de del della der den van von da di du la le al bin y".split())

def is_content_word(word: str) -> bool:
    low = word.casefold()
    return len(low) >= 3 and low not in STOP and low not in DATE_WORDS and not low.replace(".", "").isdigit()


# --- dates --------------------------------------------------------------------------

_MONTH = (
    r"(?:January|February|March|April|May|June|July|August|September|October|November|December"
    r"|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\.?"
)
_DATE = re.compile(
    rf"\b(?:\d{{1,2}}\s+{_MONTH}(?:,?\s+\d{{4}})?|{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?"
    rf"|(?:early|mid|late)[- ]{_MONTH}(?:\s+\d{{4}})?|{_MONTH}\s+\d{{4}}|\d{{4}}-\d{{2}}-\d{{2}}"
    rf"|Q[1-4]\s+\d{{4}}|(?:19|20)\d{{2}})\b"
    r"|\d{4}\s*\u5e74(?:\s*\d{1,2}\s*\u6708)?(?:\s*\d{1,2}\s*[\u65e5\u53f7])?"
    r"|\d{1,2}\s*\u6708\s*\d{1,2}\s*[\u65e5\u53f7]"
)


def date_phrases(text: str) -> list[tuple[str, int, int]]:
    """Dates as written ("3 March 2025", "2025年3月24日", "Q3 2025"), with offsets."""
    return [(m.group(), m.start(), m.end()) for m in _DATE.finditer(text)]


# --- Chinese ------------------------------------------------------------------------

@lru_cache(maxsize=8192)
def zh_tokens(text: str) -> tuple[tuple[str, str, int], ...]:
    """(word, part-of-speech flag, offset) of ``text`` by jieba's tagger (HMM on)."""
    posseg = _jieba()
    out, offset = [], 0
    for pair in posseg.dt.cut(text):
        out.append((pair.word, pair.flag, offset))
        offset += len(pair.word)
    return tuple(out)


def zh_frequency(word: str) -> int:
    """How often jieba's dictionary saw ``word`` (0: not in it, so likely a new name)."""
    posseg = _jieba()
    return int(posseg.dt.tokenizer.FREQ.get(word) or 0)

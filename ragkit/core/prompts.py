"""The prompts ragkit sends a model, and what reads them back: the entity and
relation extraction prompt (the pipeline's extract stage), the summary prompt
(its merge stage) and the keywords prompt (the query side's keywords stage).
They live here, under both sides, because more than their stage reads them:
the offline LLM tells each request apart by them (``ragkit.offline.llm``), and
replay models find a chunk's text in them (``ragkit.testing.replay``).

The extraction prompt (LightRAG's row format).

The model answers one row per line and ends with ``<|COMPLETE|>``::

    entity<|#|>Name<|#|>Type<|#|>Description
    relation<|#|>Source<|#|>Target<|#|>keywords<|#|>Description<|#|>strength

``strength`` is optional (1.0 when missing). ``ragkit.pipeline.parse`` reads the
answer; ``render_rows`` writes the same format (replay models, tests).

The chunk text sits verbatim between ``TEXT_BEGIN`` and ``TEXT_END`` lines of the
user prompt, so that a replay model can find it again (``chunk_text_of``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence

from ragkit.protocols.models import ChatRequest, Message
from ragkit.schema import Entity, Relation

FIELD_DELIMITER = "<|#|>"
COMPLETE_MARKER = "<|COMPLETE|>"
TEXT_BEGIN = "=====BEGIN TEXT====="
TEXT_END = "=====END TEXT====="

DEFAULT_ENTITY_TYPES: tuple[str, ...] = (
    "person",
    "organization",
    "location",
    "event",
    "product",
    "creative_work",
    "concept",
)
DEFAULT_LANGUAGE = "English"

# Written out literally (not rendered) so the prompt reads as the model sees it;
# a test checks that both examples parse with nothing dropped.
EXAMPLES = """\
Example 1

Text:
In 1998, Larry Page and Sergey Brin founded Google in Menlo Park, California, while they were PhD students at Stanford University.

Output:
entity<|#|>Larry Page<|#|>person<|#|>Larry Page co-founded Google in 1998 while he was a PhD student at Stanford University.
entity<|#|>Sergey Brin<|#|>person<|#|>Sergey Brin co-founded Google in 1998 while he was a PhD student at Stanford University.
entity<|#|>Google<|#|>organization<|#|>Google is a company founded in 1998 in Menlo Park, California, by Larry Page and Sergey Brin.
entity<|#|>Menlo Park<|#|>location<|#|>Menlo Park is a city in California where Google was founded.
entity<|#|>Stanford University<|#|>organization<|#|>Stanford University is where Larry Page and Sergey Brin were PhD students.
relation<|#|>Larry Page<|#|>Google<|#|>founding, co-founder<|#|>Larry Page co-founded Google in 1998.<|#|>10
relation<|#|>Sergey Brin<|#|>Google<|#|>founding, co-founder<|#|>Sergey Brin co-founded Google in 1998.<|#|>10
relation<|#|>Google<|#|>Menlo Park<|#|>founding place<|#|>Google was founded in Menlo Park, California.<|#|>7
relation<|#|>Larry Page<|#|>Stanford University<|#|>education<|#|>Larry Page was a PhD student at Stanford University when he co-founded Google.<|#|>6
relation<|#|>Sergey Brin<|#|>Stanford University<|#|>education<|#|>Sergey Brin was a PhD student at Stanford University when he co-founded Google.<|#|>6
<|COMPLETE|>

Example 2

Text:
The Thirty Years' War ended with the Peace of Westphalia, signed in Osnabrück and Münster in 1648.

Output:
entity<|#|>Thirty Years' War<|#|>event<|#|>The Thirty Years' War was a war that ended with the Peace of Westphalia in 1648.
entity<|#|>Peace of Westphalia<|#|>event<|#|>The Peace of Westphalia was signed in Osnabrück and Münster in 1648 and ended the Thirty Years' War.
entity<|#|>Osnabrück<|#|>location<|#|>Osnabrück is one of the two cities where the Peace of Westphalia was signed.
entity<|#|>Münster<|#|>location<|#|>Münster is one of the two cities where the Peace of Westphalia was signed.
relation<|#|>Peace of Westphalia<|#|>Thirty Years' War<|#|>peace treaty, end of war<|#|>The Peace of Westphalia ended the Thirty Years' War in 1648.<|#|>10
relation<|#|>Peace of Westphalia<|#|>Osnabrück<|#|>signing place<|#|>The Peace of Westphalia was signed partly in Osnabrück.<|#|>7
relation<|#|>Peace of Westphalia<|#|>Münster<|#|>signing place<|#|>The Peace of Westphalia was signed partly in Münster.<|#|>7
<|COMPLETE|>"""

SYSTEM_TEMPLATE = """\
---Role---
You are a knowledge graph specialist. You extract entities, and the relationships between them, from a text.

---Instructions---
1. Entities. Find every clearly defined, meaningful entity in the text. For each one, output one line:
   entity<|#|>entity_name<|#|>entity_type<|#|>entity_description
   - entity_name: the name as the text gives it; spell it the same way every time.
   - entity_type: one of: {entity_types}. If none fits, use: other.
   - entity_description: what the text says about the entity (attributes, role, actions), in one or two sentences, using only the text.
2. Relationships. For every pair of extracted entities that the text clearly relates, output one line:
   relation<|#|>source_entity<|#|>target_entity<|#|>relationship_keywords<|#|>relationship_description<|#|>relationship_strength
   - source_entity, target_entity: two different extracted entities, named exactly as in their entity lines.
   - relationship_keywords: a few words, separated by commas, that sum up the nature of the relationship.
   - relationship_description: one sentence explaining how the text relates the two entities.
   - relationship_strength: a number from 1 (incidental) to 10 (explicit and central to the text).
3. Format.
   - One entity or relationship per line, fields separated by <|#|>. Write nothing else: no numbering, no quotes around fields, no code fences, no comments.
   - Never put <|#|> or a line break inside a field.
   - Output all entities first, then all relationships.
   - Write types, keywords and descriptions in {language}; keep proper names as they are written in the text.
   - After the last line output <|COMPLETE|> on a line of its own. If the text has no entities, output only <|COMPLETE|>.

---Examples---
{examples}"""

USER_TEMPLATE = """\
---Task---
Extract the entities and relationships from the text between the two marker lines below.
Entity types: {entity_types}. Output language: {language}.

{begin}
{text}
{end}

---Output---
"""

GLEANING_PROMPT = """\
Some entities and relationships in the text were missed in the last extraction.
Output only the missing ones, in the same format: one row per line, fields separated by <|#|>. Do not repeat rows already given.
End with <|COMPLETE|> on a line of its own; if nothing was missed, output only <|COMPLETE|>."""


def build_extraction_request(
    chunk_text: str,
    *,
    entity_types: Sequence[str] = DEFAULT_ENTITY_TYPES,
    language: str = DEFAULT_LANGUAGE,
) -> ChatRequest:
    """The first extraction call for one chunk. Empty ``entity_types`` means the defaults."""
    types = ", ".join(t.strip() for t in entity_types if t.strip()) or ", ".join(DEFAULT_ENTITY_TYPES)
    system = SYSTEM_TEMPLATE.format(entity_types=types, language=language, examples=EXAMPLES)
    prompt = USER_TEMPLATE.format(
        begin=TEXT_BEGIN, end=TEXT_END, text=chunk_text, entity_types=types, language=language
    )
    return ChatRequest(prompt=prompt, system=system, role="extraction")


def build_gleaning_request(first: ChatRequest, first_answer: str) -> ChatRequest:
    """A "did you miss anything?" follow-up; the history carries the previous exchange.

    Chaining works: pass a gleaning request and its answer to glean once more.
    """
    history = first.history + (
        Message(role="user", content=first.prompt),
        Message(role="assistant", content=first_answer),
    )
    return first.model_copy(update={"prompt": GLEANING_PROMPT, "history": history, "role": "extraction"})


def is_gleaning_request(request: ChatRequest) -> bool:
    return request.prompt == GLEANING_PROMPT and bool(request.history)


def chunk_text_of(prompt: str) -> str | None:
    """The chunk text of an extraction prompt, exactly as given, or None.

    The first begin line and the last end line bound it, so a chunk that itself
    contains a marker line still comes back whole.
    """
    begin = prompt.find(TEXT_BEGIN + "\n")
    stop = prompt.rfind("\n" + TEXT_END)
    start = begin + len(TEXT_BEGIN) + 1
    if begin < 0 or stop < start:
        return None
    return prompt[start:stop]


def render_rows(entities: Iterable[Entity], relations: Iterable[Relation]) -> str:
    """Entities and relations in the row format the prompt asks for, marker included.

    Fields must not contain the delimiter or line breaks; callers render data
    they trust (recordings, test data).
    """
    rows = [FIELD_DELIMITER.join(("entity", e.name, e.type, e.description)) for e in entities]
    rows += [
        FIELD_DELIMITER.join(("relation", r.source, r.target, r.keywords, r.description, repr(r.strength)))
        for r in relations
    ]
    return "\n".join([*rows, COMPLETE_MARKER])


# --- summaries (pipeline/merge.py) -------------------------------------------------------

SUMMARY_SYSTEM = (
    "You maintain a knowledge graph. You condense statements about one subject "
    "without losing facts and without inventing any."
)
SUMMARY_PROMPT = """Write one description of "{subject}" in {language} that keeps every distinct fact below.
Rules:
- Keep facts about different projects, people or organisations as separate sentences; never merge two subjects' facts into one claim.
- Keep names, numbers and dates exactly as written.
- Use only the statements below.

Statements:
{statements}

Description:"""


def build_summary_request(
    subject: str, lines: Sequence[str], *, language: str, max_tokens: int
) -> ChatRequest:
    statements = "\n".join(f"- {line}" for line in lines)
    return ChatRequest(
        prompt=SUMMARY_PROMPT.format(subject=subject, language=language, statements=statements),
        system=SUMMARY_SYSTEM,
        max_tokens=max_tokens,
        temperature=0,
        role="summary",
    )


# --- aliases (core/alias_check.py) ------------------------------------------------------------

ALIASES_SYSTEM = "You decide whether two names denote one and the same real-world entity."
ALIASES_PROMPT = """Each numbered line below holds two names of entities found in one collection of documents.
For each line, decide whether both names denote the same real-world entity (the same person,
organisation, place, work, event or thing). Say "same" only when you are sure: two different
entities that share a name, a part and its whole, a product and its maker, a person and a relative,
a predecessor and a successor are not the same.

Answer with a JSON object that lists the numbers of the lines whose names are the same entity,
for example {{"same": [1, 3]}}, or {{"same": []}} when none are. Output only the JSON object.

{pairs}"""


def build_aliases_request(pairs: Sequence[tuple[str, str]]) -> ChatRequest:
    lines = "\n".join(f"{i}. {json.dumps(a, ensure_ascii=False)} | {json.dumps(b, ensure_ascii=False)}"
                      for i, (a, b) in enumerate(pairs, 1))
    return ChatRequest(prompt=ALIASES_PROMPT.format(pairs=lines), system=ALIASES_SYSTEM,
                       json_mode=True, temperature=0, max_tokens=20 + 6 * len(pairs), role="aliases")


# --- keywords (query/keywords.py) ---------------------------------------------------------

KEYWORDS_SYSTEM = "You extract search keywords from questions for a knowledge-graph search engine."
KEYWORDS_PROMPT = """Give the keywords of the question below as a JSON object with two lists:
- "high_level_keywords": the overarching themes or concepts of the question;
- "low_level_keywords": specific named things: people, organisations, places, products, terms.
Use the question's own words where possible, in {language}. Output only the JSON object.

Example:
Question: How did the delay at Yingchuan affect Project Haijia?
{{"high_level_keywords": ["supplier delay", "project schedule impact"], "low_level_keywords": ["Yingchuan", "Project Haijia"]}}

Question: {question}"""


def build_keywords_request(question: str, language: str = "English") -> ChatRequest:
    return ChatRequest(
        prompt=KEYWORDS_PROMPT.format(question=question, language=language),
        system=KEYWORDS_SYSTEM,
        json_mode=True,
        temperature=0,
        role="keywords",
    )

"""The offline LLM's extraction rules: named things, same-sentence relations,
the row format, and robustness on any text.

Troubleshoot: ``ragkit.offline.extract.extract(text)`` returns the entities and
relations before rendering; print them for the failing text. English rules live
in ``extract_en`` (capitalisation), Chinese ones in ``extract_zh`` (jieba tags).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ragkit.core.prompts import COMPLETE_MARKER
from ragkit.ids import normalize_name
from ragkit.offline.extract import extract, extraction_rows
from ragkit.pipeline.parse import parse_extraction

HAIJIA = (
    "Project Haijia, led by Gu Yao, buys control boards from Yingchuan. "
    "Yingchuan's delivery slipped and Haijia's integration moved back. "
    "Qinghe also buys from Yingchuan and started a backup-supplier review."
)
HAIJIA_ZH = "海佳项目由顾瑶负责，该项目向颖川电子采购控制板。颖川电子的交付推迟了三周。清河项目也从颖川电子采购控制板。"


def names(text: str, types=None) -> dict[str, str]:
    entities, _ = extract(text, types) if types else extract(text)
    return {e.name: e.type for e in entities}


def related(text: str) -> dict[frozenset[str], object]:
    return {frozenset((r.source, r.target)): r for r in extract(text)[1]}


def test_english_names_and_kinds():
    """Capitalised runs, a possessive at a sentence start, and a single
    sentence-initial word that is no common word are names; "Haijia" is an
    alias of "Project Haijia" in the same chunk; "led by" marks a person."""
    found = names(HAIJIA)
    assert set(found) == {"Project Haijia", "Gu Yao", "Yingchuan", "Qinghe"}
    assert found["Gu Yao"] == "person"
    assert names(HAIJIA, ["person", "project", "organization"])["Project Haijia"] == "project"


def test_english_same_sentence_relations():
    """Entities in one sentence are related; the description is that sentence
    and the keywords come from its words (those between the names first)."""
    rels = related(HAIJIA)
    lead = rels[frozenset({"Project Haijia", "Gu Yao"})]
    assert lead.description == HAIJIA.split(". ")[0] + "."
    assert lead.keywords.split(", ")[0] == "led"
    review = rels[frozenset({"Qinghe", "Yingchuan"})]
    assert "backup-supplier review" in review.keywords and "started" in review.keywords
    # Project Haijia and Yingchuan meet in two sentences: one relation, both sentences, stronger.
    both = rels[frozenset({"Project Haijia", "Yingchuan"})]
    assert "delivery slipped" in both.description and "buys control boards" in both.description
    assert both.strength > lead.strength - 1
    assert frozenset({"Gu Yao", "Qinghe"}) not in rels  # never in one sentence


def test_english_entity_description_is_the_sentences_that_mention_it():
    entities = {e.name: e for e in extract(HAIJIA)[0]}
    assert entities["Qinghe"].description == HAIJIA.rsplit(". ", 1)[1]
    assert "delivery slipped" in entities["Project Haijia"].description  # through "Haijia's"


def test_sentence_initial_common_words_dates_and_stop_words_are_not_names():
    text = (
        "Delivery slipped again. However, Integration moved back. In March 2025 the team met on Monday. "
        "Project delivery was late and the Board agreed."
    )
    assert names(text) == {}
    assert set(names(text + " Apple sells phones.")) == {"Apple"}  # no common word, never lower case


def test_codes_acronyms_honorifics_connectors_and_roles():
    found = names(
        "NASA ordered the CB-7 board in Q3 2025. Dr. Tomas Berg said the Peace of Westphalia was signed "
        "in Osnabrück. We met Li Na, the account manager, and Johnson & Johnson."
    )
    assert {"NASA", "CB-7", "Tomas Berg", "Peace of Westphalia", "Osnabrück", "Li Na", "Johnson & Johnson"} <= set(found)
    assert "Q3" not in found and "Dr" not in " ".join(found)
    assert found["CB-7"] == "product" and found["Tomas Berg"] == "person" and found["Li Na"] == "person"
    assert found["Osnabrück"] == "location"


def test_markdown_headings_and_bullets():
    text = "# Weekly Supply Status\n\n- Yingchuan Electronics: the CB-7 delivery slipped.\n- Nordlicht Sensors: on time.\n"
    found = names(text)
    assert set(found) == {"Yingchuan Electronics", "CB-7", "Nordlicht Sensors"}
    assert found["Yingchuan Electronics"] == "organization"
    assert frozenset({"Yingchuan Electronics", "Nordlicht Sensors"}) not in related(text)  # two bullets


def test_chinese_names_kinds_and_relations():
    """jieba tags: 顾瑶 (nr) a person; suffix compounds 海佳项目 (project) and
    颖川电子 (organisation); 该项目 is no name."""
    found = names(HAIJIA_ZH, ["person", "organization", "project"])
    assert found == {"海佳项目": "project", "顾瑶": "person", "颖川电子": "organization", "清河项目": "project"}
    rels = related(HAIJIA_ZH)
    lead = rels[frozenset({"海佳项目", "顾瑶"})]
    assert lead.description == "海佳项目由顾瑶负责，该项目向颖川电子采购控制板。"
    assert "负责" in lead.keywords.split(", ")
    assert frozenset({"清河项目", "颖川电子"}) in rels
    assert frozenset({"清河项目", "顾瑶"}) not in rels


def test_mixed_chinese_and_latin():
    found = names("Project Haijia 由 Gu Yao 负责，马尔塔·科瓦尔斯基 负责北岭项目，使用 CB-7 控制板。")
    assert {"Project Haijia", "Gu Yao", "马尔塔·科瓦尔斯基", "北岭项目", "CB-7"} <= set(found)


def test_rows_parse_back_with_nothing_dropped():
    """What the rules render is what the pipeline's parser reads back."""
    for text in (HAIJIA, HAIJIA_ZH, '"Quoted" <|#|> Alpha Beta met Gamma Delta.\nline <|COMPLETE|> Epsilon.'):
        entities, relations = extract(text)
        parsed = parse_extraction(extraction_rows(text))
        assert parsed.complete and parsed.dropped == 0 and not parsed.warnings, parsed.warnings
        assert parsed.entities == entities
        assert parsed.relations == relations


def test_no_entities_gives_only_the_marker():
    assert extraction_rows("") == COMPLETE_MARKER
    assert extraction_rows("the cat sat on the mat.") == COMPLETE_MARKER


_FRAGMENTS = st.sampled_from([
    "Project Haijia", "Gu Yao", " led by ", "Yingchuan's", " and ", ". ", "\n", "\n# ", "- ", "海佳项目", "由",
    "顾瑶", "负责", "。", "<|#|>", "<|>", "<|COMPLETE|>", '"', "CB-7", " of ", "Dr. ", "'s", " ", "\u2028",
    "2025年3月", "3 March 2025", "·", "马尔塔", "&", "`", "“", "”",
])


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(st.text(), st.lists(st.one_of(_FRAGMENTS, st.text(max_size=5)), max_size=30).map("".join)))
def test_extraction_never_raises_and_always_parses(text):
    """Any text gives rows the parser takes whole: no dropped row, the marker,
    names that are names of the text."""
    rows = extraction_rows(text)
    parsed = parse_extraction(rows)
    assert parsed.complete and parsed.dropped == 0, (rows, parsed.warnings)
    for entity in parsed.entities:
        assert _squash(entity.name) in _squash(text)  # names fold whitespace and Markdown emphasis
        assert normalize_name(entity.name)
    for relation in parsed.relations:
        assert normalize_name(relation.source) != normalize_name(relation.target)


def _squash(text: str) -> str:
    return re.sub(r"[\s*_`]", "", text)


def test_jieba_works_offline_from_its_own_dictionary(tmp_path):
    """jieba builds its dictionary from the file inside its package, with the
    network blocked and an empty cache folder.

    Troubleshoot: jieba must be installed from PyPI (its wheel or sdist carries
    dict.txt); nothing may call jieba.enable_paddle (it runs pip).
    """
    script = textwrap.dedent(f"""
        import socket
        def refuse(*args, **kwargs):
            raise OSError("network blocked by the test")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        import jieba
        jieba.dt.tmp_dir = {str(tmp_path)!r}
        from ragkit.offline.extract import extract
        entities, _ = extract({HAIJIA_ZH!r})
        print(sorted(e.name for e in entities))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAGKIT_")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "顾瑶" in out.stdout and "颖川电子" in out.stdout
    assert any(p.name.startswith("jieba") for p in tmp_path.iterdir()), "jieba did not build its cache here"

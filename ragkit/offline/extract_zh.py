"""Named things in Chinese text, from jieba's part-of-speech tags.

- ``nr``/``nrfg``/``nrt`` (person), ``ns`` (place), ``nt`` (organisation) are
  names; ``nz`` (other proper noun) only when jieba's dictionary does not know
  the word (its known ``nz`` words are mostly technical terms). One character
  is never a name.
- Compounds: a suffix such as 公司, 集团, 电子, 厂 (organisation) or 项目, 计划,
  工程 (project) takes the noun tokens just before it, from the first one that
  looks like a name (a proper-noun tag, or a noun the dictionary knows little:
  颖川 + 电子 = 颖川电子, 海佳 + 项目 = 海佳项目). 该项目 stays no name.
- Transliterated names joined by "·" are kept whole (马尔塔·科瓦尔斯基).

Latin words inside Chinese text (CB-7, Gu Yao) are left to the English rules.
"""

from __future__ import annotations

from ragkit.offline.text import ZH_STOP, Candidate, has_cjk, zh_frequency, zh_tokens

TAG_KIND = {"nr": "person", "nrfg": "person", "nrt": "person", "ns": "location", "nt": "organization", "nz": "other"}
NAMEISH_TAGS = frozenset({"nr", "nrfg", "nrt", "ns", "nt", "nz", "s", "j"})
NOUNISH_TAGS = NAMEISH_TAGS | {"n", "ng", "nl", "vn", "zg"}
RARE = 1000
"""A noun seen fewer times than this in jieba's dictionary may be (part of) a name."""
ORG_SUFFIX = frozenset(
    """公司 有限公司 股份有限公司 集团 电子 科技 电路 工厂 厂 大学 学院 研究所 研究院 实验室 银行 医院 协会 学会
    委员会 基金会 事务所 制造 铸造 物流 软件 通信 汽车 半导体 光电 港务局 局 部 署 厅 中心""".split()
)
ORG_ENDINGS = ("局", "委员会", "研究所", "研究院")
PROJECT_SUFFIX = frozenset("项目 计划 工程 专项 课题".split())
CONTENT_TAGS = frozenset({"n", "nz", "vn", "v", "an", "l", "i", "nl"})
_NOT_IN_NAME = frozenset({"v", "vn", "p", "uj", "ul", "c", "d", "x", "r", "m", "f", "u", "y", "q"})
MAX_WALK = 3
"""Tokens a suffix may take before it."""


def find_names(text: str) -> list[Candidate]:
    """Candidates of one sentence, in order of appearance; [] without Chinese."""
    if not has_cjk(text):
        return []
    tokens = zh_tokens(text)
    found: dict[str, Candidate] = {}
    used: set[int] = set()
    for i in range(len(tokens)):
        start = _compound_start(tokens, i)
        if start is not None:
            name = "".join(t[0] for t in tokens[start: i + 1])
            kind = "project" if tokens[i][0] in PROJECT_SUFFIX else "organization"
            found.setdefault(name, Candidate(name, structural=kind))
            used.update(range(start, i + 1))
    i = 0
    while i < len(tokens):
        end = _dotted_end(tokens, i)
        word, flag, _ = tokens[i]
        if i not in used and _proper(word, flag):
            name = "".join(t[0] for t in tokens[i:end])
            found.setdefault(name, Candidate(name)).votes[TAG_KIND[flag]] += 1
        i = max(end, i + 1)
    return list(found.values())


def is_suffix(word: str) -> bool:
    return word in ORG_SUFFIX or word in PROJECT_SUFFIX or (len(word) > 1 and word.endswith(ORG_ENDINGS))


def _compound_start(tokens: tuple[tuple[str, str, int], ...], i: int) -> int | None:
    word = tokens[i][0]
    if not is_suffix(word) or (i + 1 < len(tokens) and is_suffix(tokens[i + 1][0])):
        return None  # the longest suffix chain is handled at its last token
    walked = []
    j = i - 1
    while j >= 0 and len(walked) < MAX_WALK and tokens[j][1] in NOUNISH_TAGS and tokens[j][0] not in ZH_STOP:
        walked.append(j)
        j -= 1
    for k in reversed(walked):  # leftmost first
        if _nameish(*tokens[k][:2]):
            return k
    return None


def _nameish(word: str, flag: str) -> bool:
    if len(word) < 2 and flag not in NAMEISH_TAGS:
        return False
    return flag in NAMEISH_TAGS or (flag.startswith("n") and zh_frequency(word) < RARE)


def _proper(word: str, flag: str) -> bool:
    if flag not in TAG_KIND or len(word) < 2 or word in ZH_STOP or not has_cjk(word):
        return False
    return flag != "nz" or zh_frequency(word) == 0


def _dotted_end(tokens: tuple[tuple[str, str, int], ...], i: int) -> int:
    """End of a transliterated name "A·B" starting at ``i`` (or ``i + 1``)."""
    if tokens[i][1] not in ("nr", "nrt") or i + 2 >= len(tokens) or tokens[i + 1][0] not in ("·", "•", "・"):
        return i + 1
    end, chars = i + 2, 0
    while end < len(tokens) and tokens[end][1] not in _NOT_IN_NAME and has_cjk(tokens[end][0]) and chars < 8:
        chars += len(tokens[end][0])
        end += 1
    return end if end > i + 2 else i + 1


def content_words(text: str) -> list[tuple[str, int, int]]:
    """Chinese nouns and verbs of ``text`` worth a keyword, with offsets."""
    if not has_cjk(text):
        return []
    return [
        (word, offset, offset + len(word))
        for word, flag, offset in zh_tokens(text)
        if flag in CONTENT_TAGS and len(word) >= 2 and word not in ZH_STOP and has_cjk(word)
    ]

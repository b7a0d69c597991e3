"""Words of a text as the offline rules and lexical search both read them:
function words, a light English stem, Chinese stop words and jieba.

A leaf: ``ragkit.offline`` (the offline LLM's rules) and ``ragkit.lexical``
(the terms of full-text search) both import it, and it imports neither.
"""

from __future__ import annotations

import logging
import threading
import warnings
from typing import Any

STOP = frozenset(
    """a an the this that these those there here it its it's they them their theirs we us our ours you your
    yours he him his she her hers i me my mine who whom whose which what when where why how whatever whoever
    and or but nor so yet for of to in on at by from with without within into onto upon about above below
    over under after before during since until till between among through throughout across against along
    around behind beyond near off out up down via per than then as if else because although though while
    whereas unless once both either neither each every all any some no not none nothing something anything
    everything someone anyone everyone nobody also too very just only even still again already ever never
    always often sometimes usually soon later now today tomorrow yesterday meanwhile however therefore thus
    hence moreover furthermore instead otherwise indeed perhaps maybe yes ok okay well much many more most
    less least few fewer several such same other another own is am are was were be been being have has had
    having do does did done doing will would shall should can could may might must need needs let lets get
    gets got make makes made go goes went going come came say says said see seen use used one two three four
    five six seven eight nine ten first second third last next new old please thanks thank dear hi hello
    regards note notes see page section chapter figure table appendix re fw fwd cc subject""".split()
)
"""Function words and fillers: never a name, never a keyword."""

_IRREGULAR = {
    "led": "lead", "bought": "buy", "sold": "sell", "made": "make", "built": "build", "began": "begin",
    "begun": "begin", "took": "take", "taken": "take", "gave": "give", "given": "give", "sent": "send",
    "went": "go", "gone": "go", "ran": "run", "met": "meet", "left": "leave", "held": "hold",
    "told": "tell", "said": "say", "found": "find", "paid": "pay", "chose": "choose", "chosen": "choose",
    "wrote": "write", "written": "write", "people": "person", "men": "man", "women": "woman",
    "children": "child", "brought": "bring", "caught": "catch", "fell": "fall", "felt": "feel",
    "kept": "keep", "lost": "lose", "heard": "hear", "understood": "understand", "won": "win",
}


def base_word(word: str) -> tuple[str, bool]:
    """The word without a possessive ending, and whether it had one."""
    for ending in ("'s", "\u2019s"):
        if word.endswith(ending) and len(word) > len(ending):
            return word[: -len(ending)], True
    return word, False


def stem(word: str) -> str:
    """A light English stem so that "leads", "led" and "leading" meet ("lead")."""
    w = base_word(word.casefold().replace("\u2019", "'"))[0].strip("'")
    if w in _IRREGULAR:
        return _IRREGULAR[w]
    if len(w) <= 3 or not w.isalpha():
        return w
    for suffix, repl in (("ies", "y"), ("ied", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if not w.endswith(suffix) or len(w) - len(suffix) < 3:
            continue
        if suffix == "s" and w.endswith(("ss", "us", "is")):
            return w
        if suffix == "es" and not w.endswith(("ches", "shes", "sses", "xes", "zes")):
            continue
        w = w[: -len(suffix)] + repl
        if suffix in ("ing", "ed") and len(w) >= 4 and w[-1] == w[-2] and w[-1] not in "lsz":
            w = w[:-1]  # slipped -> slip
        break
    return w[:-1] if len(w) > 4 and w.endswith("e") else w  # move, moved -> mov


_JIEBA_LOCK = threading.Lock()
_JIEBA_READY = False

ZH_STOP = frozenset(
    """的 了 和 与 及 或 是 在 有 由 为 于 将 被 把 从 向 对 也 并 而 但 就 都 又 还 这 那 该 其 之 以 等
    中 上 下 后 前 时 个 次 种 能 会 可 要 已 已经 进行 表示 通过 因此 所以 因为 由于 如果 同时 一个 我们
    他们 她们 它们 自己 没有 不是 可以 需要 以及 其中 之后 之前 目前 现在 今天 谁 什么 哪些 哪个 哪 怎么
    如何 为什么 多少 吗 呢 吧 啊 包括 对于 关于 一些 所有 每个 这个 那个 这些 那些 成为 作为 位于 来自
    负责人 方面 情况 问题 相关 有关 其他 一家 一个 此外 然后 随后 得知 同一""".split()
)


def jieba_posseg() -> Any:
    """jieba.posseg, initialised once from the dictionary inside the package (no download)."""
    global _JIEBA_READY
    with _JIEBA_LOCK:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # its pkg_resources import warns on new setuptools
            import jieba
            import jieba.posseg as posseg
        if not _JIEBA_READY:
            jieba.setLogLevel(logging.WARNING)  # it logs "Building prefix dict..." at DEBUG
            jieba.initialize()
            _JIEBA_READY = True
    return posseg



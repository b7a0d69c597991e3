"""Credentials out of error text: one function, ``redact``, for every message
that may carry text from outside (a model server's error body, a client
library's exception) before it is printed, raised or stored.

What it replaces with ``****``:

- known secret values: those passed in, those registered with
  ``register_secret``, the credentials the failed request carried (read from
  the exception chain's ``request`` headers and URL when ``exc`` is given),
  and the values of environment variables named like a key, token or
  password (``OPENAI_API_KEY``, ``RAGKIT_LLM__API_KEY``), with a URL's password
  and its Basic-auth form. Each is found however a server wrote it back:
  as is; %-encoded (``quote``, ``quote_plus``, hex digits in either case,
  twice encoded as ``%252F``); JSON-escaped (``\\uXXXX`` for any character,
  ``\\/``, ``\\"``; escaped twice, or %-encoded); any mix of those; in base64
  (standard or URL-safe, padded or not), alone or anywhere inside a longer
  base64 text such as Basic auth's ``user:secret`` (with up to three base64
  characters either side, which mix its first and last bytes with its
  neighbours');
- what looks like a credential by position: the user info of a URL
  (``https://user:key@host``), the value of an ``Authorization`` header or of
  anything named like ``api_key`` / ``api-key`` / ``token`` / ``password``
  followed by ``:`` or ``=``, a ``Bearer`` token;
- what looks like a credential by shape: ``sk-...`` (OpenAI, Anthropic),
  ``hf_...``, ``ghp_...``, ``gsk_...``, ``xoxb-...``, ``AKIA...``.

A value shorter than ``MIN_SECRET_CHARS`` is not searched for as such (it
would blank out ordinary words); the position rules still hide it. Not
searched for: other encodings (hex, HTML entities, base32...) and a base64
text whose lines are wrapped inside the secret.

``redact`` runs on every failed call and every server log line: the regex for
a set of secrets is built once and kept (``_pattern``), so all their forms
cost one pass over the text.
"""

from __future__ import annotations

import base64
import binascii
import functools
import os
import re
import threading
from collections.abc import Iterable, Iterator
from typing import Any
from urllib.parse import unquote, urlsplit

MASK = "****"
MIN_SECRET_CHARS = 8

_URL_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.\-]*://)[^/\s@?#]+@")
_NAMED = re.compile(
    r"""(?ix)
    (?P<name>\b(?:proxy-)?authorization
        |\b[\w-]*(?:api[-_]?key|access[-_]?token|auth[-_]?token|refresh[-_]?token|secret|password|passwd)\b)
    (?P<sep>["']?\s*[:=]\s*["']?)
    (?:(?P<scheme>bearer|basic|token|digest|apikey)\s+)?
    (?P<value>[^\s"',;&)}\]]+)
    """
)
# "bearer" is also an English word: a token has a digit or punctuation in it
# (and does not end with the sentence's full stop).
_BEARER = re.compile(r"(?i)\b(bearer)\s+(?=\S*[\d_.\-/+=])[A-Za-z0-9._~+/=\-]{7,}[A-Za-z0-9_~+/=\-]")
_SHAPES = re.compile(
    r"\b(?:sk-[A-Za-z0-9_\-]{16,}|hf_[A-Za-z0-9]{20,}|gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,}"
    r"|gsk_[A-Za-z0-9]{20,}|xox[abprs]-[A-Za-z0-9\-]{10,}|AKIA[0-9A-Z]{16})"
)
_AUTH_HEADERS = ("authorization", "proxy-authorization", "api-key", "x-api-key", "x-goog-api-key")

_SECRET_WORDS = ("key", "token", "password", "passwd", "secret", "credential", "credentials", "auth")
_SECRET_SUFFIXES = ("key", "token", "password", "secret")  # apikey, accesstoken

_registered: set[str] = set()
_lock = threading.Lock()


def is_secret(name: str) -> bool:
    """Whether a value named ``name`` is a credential, by the words of the name:
    ``api_key``, ``auth_token``, ``apikey`` are; ``max_tokens`` and
    ``summary_min_tokens`` (counts, not tokens) are not. One rule for the
    settings (which hold such options as ``SecretStr``) and for the environment
    variables ``redact`` hides."""
    words = [w for w in re.split(r"[^a-z0-9]+", name.lower()) if w]
    return any(w in _SECRET_WORDS or w.startswith("auth") or w.endswith(_SECRET_SUFFIXES) for w in words)


def register_secret(value: str | None) -> None:
    """Have every later ``redact`` hide ``value`` (a key read from a settings
    file, for instance, which no environment variable holds)."""
    if value:
        with _lock:
            _registered.update(_forms(value))


def redact(text: str, *, exc: BaseException | None = None, secrets: Iterable[str | None] = ()) -> str:
    """``text`` with every credential it holds replaced by ``****``."""
    if not text:
        return text
    known = set(_registered) | _env_secrets()
    for value in secrets:
        known.update(_forms(value))
    if exc is not None:
        known |= request_secrets(exc)
    pattern = _pattern(frozenset(v for v in known if len(v) >= MIN_SECRET_CHARS))
    if pattern is not None:
        text = pattern.sub(MASK, text)
    text = _URL_USERINFO.sub(rf"\1{MASK}@", text)
    text = _NAMED.sub(_mask_named, text)
    text = _BEARER.sub(rf"\1 {MASK}", text)
    return _SHAPES.sub(MASK, text)


def _mask_named(match: re.Match[str]) -> str:
    scheme = f"{match['scheme']} " if match["scheme"] else ""
    return f"{match['name']}{match['sep']}{scheme}{MASK}"


def request_secrets(exc: BaseException) -> set[str]:
    """The credentials of the request that failed, from ``request`` (httpx,
    openai) or ``response.request`` anywhere along the exception chain."""
    found: set[str] = set()
    for request in _requests(exc):
        headers = getattr(request, "headers", None)
        for name in _AUTH_HEADERS:
            try:
                value = headers.get(name) if headers is not None else None
            except Exception:  # a foreign headers object: nothing to learn from it
                value = None
            if isinstance(value, str):
                found.update(_forms(value))
        found.update(_url_secrets(str(getattr(request, "url", "") or "")))
    return found


def _requests(exc: BaseException) -> Iterator[Any]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        for holder in (current, getattr(current, "response", None)):
            try:
                request = getattr(holder, "request", None)
            except Exception:  # httpx raises RuntimeError when a response has no request
                request = None
            if request is not None:
                yield request
        current = current.__cause__ or current.__context__


@functools.lru_cache(maxsize=256)
def _forms(value: str | None) -> frozenset[str]:
    """A secret as it may appear in text: whole, without its auth scheme,
    and for Basic auth decoded (``user:password``) with the password alone."""
    if not value:
        return frozenset()
    value = value.strip()
    forms = {value}
    scheme, _, rest = value.partition(" ")
    if rest and scheme.lower() in ("bearer", "basic", "token", "apikey"):
        forms.add(rest.strip())
        if scheme.lower() == "basic":
            try:
                decoded = base64.b64decode(rest.strip(), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                decoded = ""
            if decoded:
                forms |= {decoded, decoded.partition(":")[2]}
    forms |= _url_secrets(value)
    return frozenset(f for f in forms if f)


def _url_secrets(url: str) -> set[str]:
    """A URL's password (raw and %-decoded) and its Basic-auth form."""
    if "@" not in url or "://" not in url:
        return set()
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return set()
    if not password:
        return {user} if user else set()
    pair = f"{unquote(user or '')}:{unquote(password)}"
    return {password, unquote(password), base64.b64encode(pair.encode()).decode()}


def _env_secrets() -> frozenset[str]:
    # redact() runs on every failed attempt of a retried call: scan the
    # environment again only when it changed.
    return _scan_env(frozenset(os.environ.items()))


@functools.lru_cache(maxsize=1)
def _scan_env(environ: frozenset[tuple[str, str]]) -> frozenset[str]:
    found: set[str] = set()
    for name, value in environ:
        if is_secret(name):
            found.update(_forms(value))
        elif "://" in value and "@" in value:
            found |= _url_secrets(value)
    return frozenset(found)


# -- the written forms of a secret ---------------------------------------------------------


@functools.lru_cache(maxsize=64)
def _pattern(values: frozenset[str]) -> re.Pattern[str] | None:
    """One regex for every form of every value: each spelled out in any mix
    of encodings (longer values first, so that ``user:pw`` is masked whole,
    not around ``pw``), then the base64 of any text holding one of them."""
    if not values:
        return None
    ordered = sorted(values, key=lambda v: (-len(v), v))
    pieces = list(map(_spelled, ordered))
    cores = sorted({c for v in ordered for c in _base64_cores(v)}, key=lambda c: (-len(c), c))
    if cores:  # never an empty group: it would match every short run of letters
        pieces.append(_in_base64(cores))
    return re.compile("|".join(pieces))


_JSON_SHORT = {'"': '"', "\\": "\\", "/": "/", "\b": "b", "\f": "f", "\n": "n", "\r": "r", "\t": "t"}
_BACKSLASH = r"(?:\\{1,2}|%(?:25)?5[Cc])"
"""A JSON escape's backslash: escaped again when the JSON text sits in another
JSON string, %-encoded when it sits in a URL."""


@functools.lru_cache(maxsize=256)
def _spelled(text: str) -> str:
    """``text`` with each character as itself, %-encoded or JSON-escaped:
    a server may quote a credential from a URL, a JSON body or both."""
    return "".join(f"(?:{'|'.join(_char_forms(c))})" for c in text)


def _char_forms(c: str) -> list[str]:
    forms = [re.escape(c), "".join(f"%(?:25)?{_hex(f'{b:02X}')}" for b in c.encode())]
    if c == " ":
        forms.append(r"\+")
    units = c.encode("utf-16-be")  # \uXXXX escapes: one, or a surrogate pair beyond the BMP
    forms.append("".join(_BACKSLASH + "u" + _hex(units[i : i + 2].hex()) for i in range(0, len(units), 2)))
    if c in _JSON_SHORT:
        forms.append(_BACKSLASH + re.escape(_JSON_SHORT[c]))
    return forms


def _hex(digits: str) -> str:
    """Hex digits in either case (``%2f`` and ``%2F``, ``\\u00e9`` and ``\\u00E9``)."""
    return "".join(f"[{d.upper()}{d.lower()}]" if d.isalpha() else d for d in digits)


@functools.lru_cache(maxsize=256)
def _base64_cores(value: str) -> frozenset[str]:
    """What the base64 of any text holding ``value`` always contains, whatever
    comes before or after it: the groups of four characters that encode only
    the value's bytes, for each of its three possible alignments."""
    raw = value.encode()
    cores: set[str] = set()
    for shift in range(3):
        encoded = base64.b64encode(bytes(shift) + raw).decode()
        first, end = (1 if shift else 0), (shift + len(raw)) // 3  # groups made of the value's bytes only
        core = encoded[4 * first : 4 * end]
        if len(core) >= MIN_SECRET_CHARS:
            cores |= {core, core.translate(_URLSAFE)}
    return frozenset(cores)


_URLSAFE = str.maketrans("+/", "-_")
_B64_CHAR = r"(?:[A-Za-z0-9_\-]|\+|%2[Bb]|/|%2[Ff]|\\/)"
_B64_PAD = r"(?:=|%3[Dd]|%253[Dd])"
_B64_SPELLED = {"+": r"(?:\+|%(?:25)?2[Bb])", "/": r"(?:/|%(?:25)?2[Ff]|\\/)"}
"""The base64 characters a URL or a JSON text may write otherwise."""


def _in_base64(cores: list[str]) -> str:
    """Any of the cores with the (at most three) characters either side that
    mix a value's first or last bytes with its neighbours', and any padding.
    One group for all of them: the engine then tries the edge once per place."""
    body = "|".join("".join(_B64_SPELLED.get(c) or c for c in core) for core in cores)  # the rest need no escape
    return f"{_B64_CHAR}{{0,3}}(?:{body}){_B64_CHAR}{{0,3}}{_B64_PAD}{{0,2}}"

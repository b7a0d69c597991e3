"""Process-wide state that a test sets and must leave as it found it.

Two things in ragkit live once per process: the secrets handed to
``ragkit.redact.register_secret`` (every later ``redact`` hides them) and
whether the offline LLM's notice was printed (``ragkit.offline.notice_once``).
A test that registers a secret, or checks that the notice prints once, needs a
clean slate and must not leak into the next test. These context managers give
that, in one documented place, rather than each test reaching into the modules.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def registered_secrets_isolated() -> Iterator[None]:
    """No registered secrets inside the block; those registered before it are
    back (and those registered in it forgotten) after it."""
    from ragkit import redact

    with redact._lock:
        saved = set(redact._registered)
        redact._registered.clear()
    try:
        yield
    finally:
        with redact._lock:
            redact._registered.clear()
            redact._registered.update(saved)


@contextlib.contextmanager
def offline_notice_unsent() -> Iterator[None]:
    """``notice_once`` prints again inside the block, as in a fresh process;
    after it, the notice counts as printed if it was before or inside."""
    from ragkit import offline

    with offline._lock:
        before, offline._noticed = offline._noticed, False
    try:
        yield
    finally:
        with offline._lock:
            offline._noticed = before or offline._noticed

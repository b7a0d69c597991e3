"""Every log line of the server through ``ragkit.redact``: uvicorn's access
lines (a URL may carry anything a client sent) and tracebacks (an exception's
text may quote a backend's password) are redacted before any handler sees them."""

from __future__ import annotations

import logging
import traceback

from ragkit.redact import redact

LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", "ragkit", "fastapi")


class RedactFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        # The arguments keep their shape: uvicorn's access formatter unpacks them.
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        elif isinstance(record.args, dict):
            record.args = {k: redact(v) if isinstance(v, str) else v for k, v in record.args.items()}
        if record.exc_info and record.exc_info[1] is not None and not record.exc_text:
            record.exc_text = redact("".join(traceback.format_exception(*record.exc_info)).rstrip("\n"))
        return True


def install() -> None:
    """Idempotent: one filter per logger and per handler of the root logger."""
    for name in LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, RedactFilter) for f in logger.filters):
            logger.addFilter(RedactFilter())
        for handler in logger.handlers + logging.getLogger().handlers:
            if not any(isinstance(f, RedactFilter) for f in handler.filters):
                handler.addFilter(RedactFilter())

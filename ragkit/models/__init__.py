"""Calling a model service over the network: one retry policy, one limit on
calls in flight and one usage log, shared by every remote model adapter.

An adapter subclasses ``RemoteModel`` (which resolves ``base_url`` and the
API key from ``RemoteOptions`` and the environment, and makes its client on
first use) and sends every request through ``self.calls``::

    response = await self.calls.run(lambda: self.client().chat.completions.create(...))
    async for chunk in self.calls.stream(lambda: self.client().chat(..., stream=True)):
        ...
    self.usage.record(request.role, input_tokens, output_tokens)

What it does with a failure (``classify``):

- retried: HTTP 408, 409, 429 and 5xx, timeouts and connection errors, after
  an exponential backoff with jitter, or after the server's ``Retry-After``
  (``retry-after-ms``) when it sends one; a ``Retry-After`` longer than
  ``max_retry_after`` gives up at once instead of sleeping for an hour;
- not retried: everything else (401, 404, 400...);
- either way the last failure becomes a ``ModelError`` that names the service,
  the model and the fix (``describe_failure``), with the server's own words;
  its ``public`` text, all a client of ``ragkit serve`` sees, names only the
  cause (``describe_cause``): "the LLM server refused the credentials (HTTP
  401)", never the URL or what the server said.

The client library's own retries must be off (``max_retries=0``), so that
this is the single policy. A streamed response is retried only until its first
piece arrives: after that, a retry would repeat text already handed out.

The parts, one module each: ``options`` (``RemoteOptions``, secrets, model
identity), ``retry`` (``RetryPolicy`` and the call runner ``ModelCalls``),
``failures`` (``classify`` and the messages), ``usage`` (``UsageLog``),
``remote`` (``RemoteModel``) and ``embeddings`` (batches, vector checks).
``ragkit.models.http`` re-exports them all under the name plugins first used.
"""

from ragkit.models.embeddings import check_vectors, embed_in_batches, embedding_dimension
from ragkit.models.failures import (
    RETRYABLE,
    Failure,
    Reason,
    Service,
    classify,
    describe_cause,
    describe_failure,
    parse_retry_after,
    without_credentials,
)
from ragkit.models.options import RemoteOptions, model_identity, secret_value
from ragkit.models.remote import RemoteModel
from ragkit.models.retry import ModelCalls, RetryPolicy
from ragkit.models.usage import UsageLog, UsageRecord

__all__ = [
    "RETRYABLE",
    "Failure",
    "ModelCalls",
    "Reason",
    "RemoteModel",
    "RemoteOptions",
    "RetryPolicy",
    "Service",
    "UsageLog",
    "UsageRecord",
    "check_vectors",
    "classify",
    "describe_cause",
    "describe_failure",
    "embed_in_batches",
    "embedding_dimension",
    "model_identity",
    "parse_retry_after",
    "secret_value",
    "without_credentials",
]

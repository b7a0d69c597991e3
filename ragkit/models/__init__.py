"""Shared machinery for model adapters that call a service: retries with
backoff and ``Retry-After``, a limit on calls in flight, usage accounting and
error messages that name the fix. See ``ragkit.models.http``."""

from ragkit.models.http import (
    Failure,
    ModelCalls,
    RemoteModel,
    RemoteOptions,
    RetryPolicy,
    Service,
    UsageLog,
    UsageRecord,
    check_vectors,
    classify,
    describe_failure,
    embed_in_batches,
    embedding_dimension,
    model_identity,
    parse_retry_after,
    secret_value,
    without_credentials,
)

__all__ = [
    "Failure",
    "ModelCalls",
    "RemoteModel",
    "RemoteOptions",
    "RetryPolicy",
    "Service",
    "UsageLog",
    "UsageRecord",
    "check_vectors",
    "classify",
    "describe_failure",
    "embed_in_batches",
    "embedding_dimension",
    "model_identity",
    "parse_retry_after",
    "secret_value",
    "without_credentials",
]

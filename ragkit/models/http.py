"""The remote-model machinery under the name plugins first imported it by;
each part now lives in its own module of ``ragkit.models`` (see there).
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

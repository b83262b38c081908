"""asyncio client for the matrix-push-worker pool (RPC contract v1, over RabbitMQ)."""

from .client import (
    DEFAULT_DELIVER_QUEUE,
    DEFAULT_EVALUATE_QUEUE,
    DEFAULT_QUEUE,
    DEFAULT_READ_QUEUE,
    PushRulesClient,
)
from .errors import PushRulesError, TransportFailure
from .evaluate import EvaluateManyEvent
from .evaluate_coalescer import EvaluateCoalescing

__all__ = [
    "DEFAULT_DELIVER_QUEUE",
    "DEFAULT_EVALUATE_QUEUE",
    "DEFAULT_QUEUE",
    "DEFAULT_READ_QUEUE",
    "EvaluateCoalescing",
    "EvaluateManyEvent",
    "PushRulesClient",
    "PushRulesError",
    "TransportFailure",
]

"""Deliver events to a receiver exactly as the service does (spec §3.3, §6, §7, §8).

For local and CI testing: signed POSTs with a new ``t`` per attempt, the 10 s
deadline, the status classification, reserved-destination refusal, exponential
retries for 24 h, the 1000/min throttle, duplicates and reordering on request, and a
per-endpoint audit log with the failure-notification rule.

Modules, one concept each::

    classification  status / transport failure -> success, temporary, permanent
    addresses       reserved IPv4/IPv6 ranges, resolvers, the destination check
    schedule        RetryPolicy: backoff with jitter, dead after 24 h
    ratelimit       RateLimiter: sliding window, throttles
    endpoint        Endpoint configuration, OutboundEvent and its envelope
    audit           AuditLog, endpoint status, dead-event report, notification rule
    clock           SystemClock, VirtualClock, ScaledClock
    sender          Sender: one attempt over httpx
    emulator        Emulator: the queue and state machine
    inprocess       asgi_sender, deliver_to_app: deliver into an ASGI app in-process

Needs ``httpx`` (the ``http`` extra).
"""

from __future__ import annotations

try:
    import httpx as _httpx  # noqa: F401
except ImportError as error:  # pragma: no cover - exercised only without the extra
    from .._extras import missing_extra

    raise missing_extra("http", "httpx", what=__name__, cause=error) from error

from .addresses import (
    RESERVED_IPV4,
    RESERVED_IPV6,
    ReservedAddressError,
    Resolver,
    StaticResolver,
    SystemResolver,
    UnresolvableHostError,
    check_addresses,
    reserved_reason,
)
from .audit import (
    AuditEntry,
    AuditLog,
    DeadEvent,
    EndpointStatus,
    FailureNotification,
    FailureRateMonitor,
)
from .classification import (
    RETRIED_STATUSES,
    Failure,
    Result,
    classify_failure,
    classify_status,
)
from .clock import Clock, ScaledClock, SystemClock, VirtualClock
from .emulator import Delivery, DeliveryState, Emulator, Summary, sample_event_for
from .endpoint import MAX_BODY_SIZE, Endpoint, OutboundEvent, encode_envelope
from .inprocess import asgi_sender, deliver_to_app
from .ratelimit import RateLimiter, delivery_keys
from .schedule import RetryPolicy
from .sender import CONTENT_TYPE, DEFAULT_DEADLINE, AttemptResult, Sender

__all__ = [
    "CONTENT_TYPE",
    "DEFAULT_DEADLINE",
    "MAX_BODY_SIZE",
    "RESERVED_IPV4",
    "RESERVED_IPV6",
    "RETRIED_STATUSES",
    "AttemptResult",
    "AuditEntry",
    "AuditLog",
    "Clock",
    "DeadEvent",
    "Delivery",
    "DeliveryState",
    "Emulator",
    "Endpoint",
    "EndpointStatus",
    "Failure",
    "FailureNotification",
    "FailureRateMonitor",
    "OutboundEvent",
    "RateLimiter",
    "ReservedAddressError",
    "Resolver",
    "Result",
    "RetryPolicy",
    "ScaledClock",
    "Sender",
    "StaticResolver",
    "Summary",
    "SystemClock",
    "SystemResolver",
    "UnresolvableHostError",
    "VirtualClock",
    "asgi_sender",
    "check_addresses",
    "classify_failure",
    "classify_status",
    "deliver_to_app",
    "delivery_keys",
    "encode_envelope",
    "reserved_reason",
    "sample_event_for",
]

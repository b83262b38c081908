"""The Synapse module's `config:` block, checked when Synapse starts (`parse_config`).

A bad value stops Synapse with a message naming the option; a broker URL is never echoed (it may
carry a password).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from .broker import parse_broker_urls
from .client import DEFAULT_DELIVER_QUEUE, DEFAULT_EVALUATE_QUEUE, DEFAULT_QUEUE

MAIN_PROCESS = "master"
"""Synapse's name for its main process (its `worker_name` is unset)."""


@dataclass(frozen=True)
class ModuleConfig:
    amqp_url: str | tuple[str, ...]
    """One broker URL, or several nodes (as `PushRulesClient` takes them)."""
    publisher_user_id: str
    """The broker user the module connects as, listed in the workers' `TRUSTED_PUBLISHERS`."""
    queue: str = DEFAULT_QUEUE
    evaluate_queue: str = DEFAULT_EVALUATE_QUEUE
    deliver_queue: str = DEFAULT_DELIVER_QUEUE
    timeout_seconds: float = 10.0
    """Each call's deadline."""
    max_age_ms: int = 3_600_000
    """An event not handed to the pool this long after it came is dropped (as the workers'
    `delivery.maxAgeMs` drops a late notification)."""
    max_pending_bytes: int = 64 * 1024 * 1024
    """Estimated bytes of events waiting for the pool; past it the oldest are dropped."""
    max_pending_account_calls: int = 10_000
    """Logouts and deactivations waiting for the pool; past it the oldest are dropped."""
    include_content: bool = True
    """Send the event's `content` in the notification (Synapse's `push.include_content`)."""
    instance_name: str = MAIN_PROCESS
    """The one Synapse process that pushes events (every process sees every event)."""


_POSITIVE_INTEGERS = ("max_age_ms", "max_pending_bytes", "max_pending_account_calls")
_NAMES = ("queue", "evaluate_queue", "deliver_queue", "publisher_user_id", "instance_name")


def parse_module_config(raw: Mapping[str, Any] | None) -> ModuleConfig:
    """The checked config. Raises `ValueError` naming the first bad option."""
    given = dict(raw or {})
    known = {each.name for each in fields(ModuleConfig)}
    unknown = sorted(str(key) for key in given if key not in known)
    if unknown:
        raise ValueError(f"unknown option(s): {', '.join(unknown)}")
    if "amqp_url" not in given:
        raise ValueError("amqp_url is required")
    if "publisher_user_id" not in given:
        raise ValueError("publisher_user_id is required (the broker user the workers trust)")
    url = given["amqp_url"]
    if isinstance(url, list) and all(isinstance(each, str) for each in url):
        given["amqp_url"] = tuple(url)
    elif not isinstance(url, str):
        raise ValueError("amqp_url must be a URL or a list of URLs")
    try:
        parse_broker_urls(given["amqp_url"])
    except ValueError as error:
        raise ValueError(f"amqp_url: {error}") from None
    for name in _NAMES:
        if name in given and (not isinstance(given[name], str) or given[name] == ""):
            raise ValueError(f"{name} must be a non-empty string")
    for name in _POSITIVE_INTEGERS:
        if name in given and (type(given[name]) is not int or given[name] < 1):
            raise ValueError(f"{name} must be a positive integer")
    timeout = given.get("timeout_seconds", 10.0)
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 3600:
        raise ValueError("timeout_seconds must be a number of seconds above 0, at most 3600")
    given["timeout_seconds"] = float(timeout)
    if "include_content" in given and not isinstance(given["include_content"], bool):
        raise ValueError("include_content must be true or false")
    return ModuleConfig(**given)

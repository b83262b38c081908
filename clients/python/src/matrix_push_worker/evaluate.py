"""`evaluate`'s request as the client sends it, and its reply as the caller gets it.

The client asks for the compact reply by positions (`compact` and `runs`: a
few bytes for a large room) and hands back the default shape
(`{"notify": {user_id: actions}, "evaluated": n}`), whichever form the worker
answered in (a worker that predates `runs` answers `user_ids`, one that
predates `compact` the default form). From `GROUP_RECIPIENTS_FROM`
recipients it sends them grouped by server (`recipients_by_server`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from typing_extensions import NotRequired, TypedDict

from .errors import PushRulesError
from .wire_types import (
    EvaluateCompactReply,
    EvaluateEntry,
    EvaluateReply,
    EvaluationEvent,
    EvaluationRecipient,
    EvaluationRoom,
    PushAction,
    RecipientsOfServer,
    Reply,
)

GROUP_RECIPIENTS_FROM = 100
"""Recipients from which they are sent grouped by server."""

MAX_BATCH_EVENTS = 64
"""Events per message of `evaluate_many` (the workers take up to `evaluate.maxBatchEvents`, 256)."""

MAX_BATCH_BYTES = 1 << 20
"""Bytes of events' JSON per message of `evaluate_many` (the workers take up to 4 MiB)."""


class EvaluateManyEvent(TypedDict):
    """One event of `evaluate_many`: the arguments of one `evaluate()` call."""

    event: EvaluationEvent
    room: EvaluationRoom
    recipients: Sequence[EvaluationRecipient]
    explain: NotRequired[bool]


@dataclass(frozen=True)
class EvaluateItem:
    entry: EvaluateEntry
    """The single form without `op`; also a batch entry."""
    order: Sequence[EvaluationRecipient]
    """The recipients in the order the entry names them: what a reply's `runs` count in."""


def evaluate_item(
    event: EvaluationEvent, room: EvaluationRoom, recipients: Sequence[EvaluationRecipient], explain: bool
) -> EvaluateItem:
    entry: EvaluateEntry = {"event": event, "room": room}
    grouped = group_recipients_by_server(recipients) if len(recipients) >= GROUP_RECIPIENTS_FROM else None
    if grouped is None:
        entry["recipients"] = list(recipients)
        order = recipients
    else:
        entry["recipients_by_server"], order = grouped
    if explain:
        entry["explain"] = True
    entry["compact"] = True
    entry["runs"] = True
    return EvaluateItem(entry, order)


def group_recipients_by_server(
    recipients: Sequence[EvaluationRecipient],
) -> tuple[list[RecipientsOfServer], list[EvaluationRecipient]] | None:
    """The grouped form and the recipients in the order it names them; None when some user ID has
    no `@` or no `:` (the plain form then carries the list, and the worker's refusal names it)."""
    # Two passes, the second per server with list comprehensions: this runs for every recipient of
    # every large room, and was most of the client's CPU per `evaluate` of one (bench/README.md).
    groups: dict[str, tuple[list[str], list[EvaluationRecipient]]] = {}
    for recipient in recipients:
        user_id = recipient["user_id"]
        head, colon, server = user_id.partition(":")
        if not colon or not head.startswith("@"):
            return None
        entry = groups.get(server)
        if entry is None:
            groups[server] = ([head[1:]], [recipient])
        else:
            entry[0].append(head[1:])
            entry[1].append(recipient)
    grouped: list[RecipientsOfServer] = []
    for server, (localparts, members) in groups.items():
        group: RecipientsOfServer = {"server": server, "localparts": localparts}
        display_names = [member.get("display_name") for member in members]
        if any(name is not None for name in display_names):
            group["display_names"] = display_names
        grouped.append(group)
    return grouped, [member for _, members in groups.values() for member in members]


def evaluate_answer(reply: Reply, order: Sequence[EvaluationRecipient]) -> EvaluateReply:
    """One event's answer in the default form, or its own `PushRulesError`."""
    if not reply["ok"]:
        raise PushRulesError(reply["error"])
    body = reply["body"]
    if isinstance(body, dict) and "notify_groups" in body:
        return _expand(cast(EvaluateCompactReply, body), order)
    return cast(EvaluateReply, body)


def _expand(compact: EvaluateCompactReply, order: Sequence[EvaluationRecipient]) -> EvaluateReply:
    """The default form from the compact one; the recipients of a group share one actions list."""
    notify: dict[str, list[PushAction]] = {}
    for group in compact["notify_groups"]:
        actions = group["actions"]
        if "runs" not in group:
            for user_id in group.get("user_ids", []):
                notify[user_id] = actions
            continue
        runs = group["runs"]
        for pair in range(0, len(runs) - 1, 2):
            first, count = runs[pair], runs[pair + 1]
            for index in range(max(0, first), min(len(order), first + count)):
                notify[order[index]["user_id"]] = actions
    answer: EvaluateReply = {"notify": notify, "evaluated": compact["evaluated"]}
    if "rule_ids" in compact:
        answer["rule_ids"] = compact["rule_ids"]
    return answer


def batches(items: Sequence[EvaluateItem]) -> list[list[int]]:
    """`evaluate_many`'s items split into messages: positions, at most `MAX_BATCH_EVENTS` and
    `MAX_BATCH_BYTES` of JSON each (an event larger than that goes alone). An item that cannot be
    serialized is left out: its caller fails it alone."""
    messages: list[list[int]] = []
    current: list[int] = []
    size = 0
    for index, item in enumerate(items):
        try:
            item_bytes = len(json.dumps(item.entry, separators=(",", ":"), ensure_ascii=False).encode())
        except (TypeError, ValueError, RecursionError):
            continue
        if current and (len(current) >= MAX_BATCH_EVENTS or size + item_bytes > MAX_BATCH_BYTES):
            messages.append(current)
            current, size = [], 0
        current.append(index)
        size += item_bytes
    if current:
        messages.append(current)
    return messages

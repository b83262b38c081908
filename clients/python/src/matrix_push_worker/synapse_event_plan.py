"""What the Synapse module asks the pool about one event, and what it hands to `notify` after.

Who may be pushed follows Synapse's own push path (`synapse/push/bulk_push_rule_evaluator.py`, 1.163):
the room's local joined members but the sender, or, for a membership event, its target alone; the
room facts are those its evaluator reads (joined member count, the sender's power level, the power
levels' `notifications`, display names); the notification carries what its HTTP pusher sends. Every
place where this differs from Synapse is listed in docs/synapse-module.md.

Pure: Synapse's event and state objects are read through the protocols of `synapse_objects`, never
imported, so this runs (and is tested) without Synapse. Everything it returns is plain data, safe to
hand to another thread.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from .synapse_objects import EventLike, StateMap
from .synapse_power_levels import notification_power_levels, sender_power_level
from .wire_types import (
    EvaluationEvent,
    EvaluationRecipient,
    EvaluationRoom,
    NotifyNotification,
    NotifyRecipient,
    PushAction,
)

MEMBER = "m.room.member"
ROOM_NAME = "m.room.name"
CANONICAL_ALIAS = "m.room.canonical_alias"

HIDDEN_TYPES = frozenset({"m.room.dummy", "m.room.aliases"})
"""Types Synapse never shows a client, so never pushes."""

NOTIFY_RECIPIENTS_PER_MESSAGE = 10_000
"""Recipients of one `notify` message (the workers take up to `delivery.maxRecipients`, 100,000)."""

MAX_MESSAGE_ID_BYTES = 255
"""An AMQP `message_id` is a short string."""

_ALIAS = re.compile(r"^#.*:.+$")


@dataclass(frozen=True)
class JoinedBefore:
    """A membership event someone else sent: its target is pushed only if they were joined before it."""

    target: str
    previous_event_id: str | None
    """The target's membership event this one replaced (`unsigned.replaces_state`), if any."""


@dataclass(frozen=True)
class Checks:
    """What Synapse decides from data the module reads through Synapse after the evaluation, only for
    the recipients the pool notified (the outcome is the same as checking everyone first)."""

    ignored_sender: str | None = None
    """A non-state event: recipients who ignore this sender (`m.ignored_user_list`) are not pushed."""
    invitee: str | None = None
    """An invite: the invitee is not pushed when their `m.invite_permission_config` blocks invites."""
    joined_before: JoinedBefore | None = None

    @property
    def needed(self) -> bool:
        return self.ignored_sender is not None or self.invitee is not None or self.joined_before is not None


@dataclass(frozen=True)
class EventPush:
    """One event's work for the pool: plain data, built in Synapse's thread and used in the module's."""

    event_id: str
    event: EvaluationEvent
    room: EvaluationRoom
    recipients: tuple[EvaluationRecipient, ...]
    notification: NotifyNotification
    target: str | None
    """A membership event's `state_key`: each recipient gets `user_is_target`."""
    checks: Checks = field(default_factory=Checks)
    size: int = 0
    """Estimated bytes held while it waits."""


@dataclass(frozen=True)
class Skipped:
    """An event the module hands nothing for, and why."""

    reason: str


def plan_event(
    event: EventLike, state: StateMap, server_name: str, *, include_content: bool = True
) -> EventPush | Skipped:
    """The work for `event`, or why there is none. `state` is the room's current state."""
    metadata = event.internal_metadata
    if not metadata.is_notifiable():
        return Skipped("not-notifiable")
    if metadata.is_soft_failed():
        return Skipped("soft-failed")
    if event.type in HIDDEN_TYPES:
        return Skipped("hidden-type")
    state_key = event.get_state_key()
    sender = event.sender
    outlier = metadata.is_outlier()

    joined = 0
    names: dict[str, str] = {}
    locals_joined: list[str] = []
    for (kind, key), member in state.items():
        if kind != MEMBER or member.content.get("membership") != "join":
            continue
        joined += 1
        name = _display_name(member.content)
        if name is not None:
            names[key] = name
        if key != sender and is_local(key, server_name):
            locals_joined.append(key)

    checks = Checks()
    target: str | None = None
    if event.type == MEMBER and state_key is not None:
        target = state_key
        candidates = [state_key] if state_key != sender and is_local(state_key, server_name) else []
        if event.content.get("membership") == "invite":
            checks = Checks(invitee=state_key)
        else:
            previous = event.unsigned.get("replaces_state")
            checks = Checks(
                joined_before=JoinedBefore(state_key, previous if isinstance(previous, str) else None)
            )
        if state_key not in names:
            own = _display_name(event.content)
            if own is not None:
                names[state_key] = own
    else:
        candidates = sorted(locals_joined)
        if state_key is None:
            checks = Checks(ignored_sender=sender)
    if not candidates:
        return Skipped("no-recipients")

    recipients = tuple(_recipient(user_id, names.get(user_id)) for user_id in candidates)
    room: EvaluationRoom = {"member_count": joined}
    if not outlier:
        level = sender_power_level(sender, state, event.room_version)
        if level is not None:
            room["sender_power_level"] = level
        room["notification_power_levels"] = notification_power_levels(state, event.room_version)

    content = thaw(event.content)
    client_event: dict[str, Any] = {
        "event_id": event.event_id,
        "type": event.type,
        "room_id": event.room_id,
        "sender": sender,
        "origin_server_ts": event.origin_server_ts,
        "content": content,
    }
    if state_key is not None:
        client_event["state_key"] = state_key
    if isinstance(event.redacts, str):
        client_event["redacts"] = event.redacts
    notification = _notification(event, state, outlier, content if include_content else None)
    size = 2 * len(json.dumps(client_event, ensure_ascii=False)) + 512
    size += sum(64 + len(r["user_id"]) + len(r.get("display_name", "")) for r in recipients)
    return EventPush(
        event_id=event.event_id,
        event=cast(EvaluationEvent, client_event),
        room=room,
        recipients=recipients,
        notification=notification,
        target=target,
        checks=checks,
        size=size,
    )


def is_local(user_id: str, server_name: str) -> bool:
    """As Synapse's `is_mine_id`: the part after the first `:` is this server's name."""
    _, colon, domain = user_id.partition(":")
    return colon == ":" and domain == server_name


def ignores(ignored_user_list: Mapping[str, Any] | None, sender: str) -> bool:
    """Whether a user's `m.ignored_user_list` account data ignores `sender`."""
    if ignored_user_list is None:
        return False
    ignored = ignored_user_list.get("ignored_users")
    return isinstance(ignored, Mapping) and sender in ignored


def invites_blocked(invite_permission_config: Mapping[str, Any] | None) -> bool:
    """Whether a user's `m.invite_permission_config` account data (MSC4380) blocks every invite."""
    return invite_permission_config is not None and invite_permission_config.get("default_action") == "block"


def notify_messages(
    push: EventPush, notified: Mapping[str, Sequence[PushAction]]
) -> list[tuple[str, list[NotifyRecipient]]]:
    """The `notify` messages for the notified recipients, in the order of `push.recipients`, each with
    its `messageId`: the event ID and the message's index, the same on every retry."""
    recipients: list[NotifyRecipient] = []
    for recipient in push.recipients:
        user_id = recipient["user_id"]
        actions = notified.get(user_id)
        if actions is None:
            continue
        entry: NotifyRecipient = {"user_id": user_id, "actions": list(actions)}
        if push.target is not None:
            entry["user_is_target"] = user_id == push.target
        recipients.append(entry)
    size = NOTIFY_RECIPIENTS_PER_MESSAGE
    return [
        (message_id(push.event_id, index), recipients[start : start + size])
        for index, start in enumerate(range(0, len(recipients), size))
    ]


def message_id(event_id: str, index: int) -> str:
    """`<event ID>/<index>`; with an event ID too long for that, its SHA-256 instead."""
    plain = f"{event_id}/{index}"
    if len(plain.encode()) <= MAX_MESSAGE_ID_BYTES:
        return plain
    return f"sha256:{hashlib.sha256(event_id.encode()).hexdigest()}/{index}"


def thaw(value: Any) -> Any:
    """A plain JSON value from Synapse's immutable mappings and sequences (which `json` cannot write),
    copied, so that nothing of Synapse's is shared with the module's thread."""
    if isinstance(value, Mapping):
        return {str(key): thaw(item) for key, item in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return [thaw(item) for item in value]
    return value


def _recipient(user_id: str, display_name: str | None) -> EvaluationRecipient:
    recipient: EvaluationRecipient = {"user_id": user_id}
    if display_name is not None:
        recipient["display_name"] = display_name
    return recipient


def _display_name(content: Mapping[str, Any]) -> str | None:
    name = content.get("displayname")
    return name if isinstance(name, str) and name != "" else None


def _notification(
    event: EventLike, state: StateMap, outlier: bool, content: dict[str, Any] | None
) -> NotifyNotification:
    """What Synapse's HTTP pusher puts in a notification besides counts, prio and devices (the
    workers add those): the sender's display name and the room's name as its `push_tools` finds them."""
    notification: NotifyNotification = {
        "event_id": event.event_id,
        "room_id": event.room_id,
        "type": event.type,
        "sender": event.sender,
    }
    if content:
        notification["content"] = content
    sender_name: str | None = None
    room_name: str | None = None
    if outlier:
        # No room state for an invite or knock from another server: what came with it.
        if event.get_state_key() == event.sender:
            sender_name = _display_name(event.content)
        stripped = event.unsigned.get("invite_room_state") or event.unsigned.get("knock_room_state") or []
        for entry in stripped if isinstance(stripped, Sequence) else []:
            if not isinstance(entry, Mapping) or not isinstance(entry.get("content"), Mapping):
                continue
            if entry.get("type") == MEMBER and entry.get("state_key") == event.sender:
                sender_name = _display_name(entry["content"]) or sender_name
            elif entry.get("type") == ROOM_NAME and entry.get("state_key") == "":
                name = entry["content"].get("name")
                room_name = name if isinstance(name, str) and name != "" else room_name
    else:
        member = state.get((MEMBER, event.sender))
        if member is not None:
            sender_name = _display_name(member.content) or event.sender
        name_event = state.get((ROOM_NAME, ""))
        alias_event = state.get((CANONICAL_ALIAS, ""))
        name = name_event.content.get("name") if name_event is not None else None
        alias = alias_event.content.get("alias") if alias_event is not None else None
        if isinstance(name, str) and name != "":
            room_name = name
        elif isinstance(alias, str) and _ALIAS.match(alias):
            room_name = alias
    if sender_name:
        notification["sender_display_name"] = sender_name
    if room_name:
        notification["room_name"] = room_name
    return notification

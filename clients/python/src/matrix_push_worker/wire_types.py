"""The RPC contract (v1) as Python types: request and reply bodies, by hand.

Written from docs/rpc-contract.md and docs/delivery.md with the spec's own
field names (Matrix wire names, snake_case, as a homeserver sees them), one
TypedDict per JSON object. Objects are open on the wire (unknown fields are
ignored by the workers), so a value may carry more keys than named here.

This file stands in for one generated from contract/schemas/ (JSON Schema):
keep it free of logic so that it can be replaced by the generated one.
"""

from __future__ import annotations

from typing import Any, Literal

from typing_extensions import NotRequired, TypedDict

JsonObject = dict[str, Any]

RuleKind = Literal["override", "content", "room", "sender", "underride"]

# ---- Push rules (Matrix client-server API, push rules) ---------------------

PushCondition = JsonObject
"""A condition: `{"kind": "event_match", "key", "pattern"}` and the others of the spec; unknown kinds kept."""

PushAction = str | JsonObject
"""`"notify"` (and the legacy strings), or a tweak `{"set_tweak": "sound", "value": "default"}`."""


class PushRule(TypedDict):
    rule_id: str
    default: bool
    enabled: bool
    actions: list[PushAction]
    conditions: NotRequired[list[PushCondition]]
    pattern: NotRequired[str]


class Ruleset(TypedDict):
    override: list[PushRule]
    content: list[PushRule]
    room: list[PushRule]
    sender: list[PushRule]
    underride: list[PushRule]


class RuleBody(TypedDict):
    """The body of `PUT /pushrules/{scope}/{kind}/{ruleId}`."""

    actions: list[PushAction]
    conditions: NotRequired[list[PushCondition]]
    pattern: NotRequired[str]


# `global` is a keyword: the functional form.
PushRulesBody = TypedDict("PushRulesBody", {"global": Ruleset})
"""`get_pushrules`: `{"global": {override, content, room, sender, underride}}`."""


class ActionsBody(TypedDict):
    """`get_pushrule_actions`."""

    actions: list[PushAction]


class EnabledBody(TypedDict):
    """`get_pushrule_enabled`."""

    enabled: bool


EmptyBody = dict[str, Any]
"""A write's success body: `{}`."""

# ---- Pushers -----------------------------------------------------------------

PusherSetAction = TypedDict(
    "PusherSetAction",
    {
        "pushkey": NotRequired[str],
        "kind": NotRequired[str | None],
        "app_id": NotRequired[str],
        "app_display_name": NotRequired[str],
        "device_display_name": NotRequired[str],
        "profile_tag": NotRequired[str],
        "lang": NotRequired[str],
        "data": NotRequired[JsonObject],
        "append": NotRequired[bool],
        "enabled": NotRequired[bool | None],
        "org.matrix.msc3881.enabled": NotRequired[bool | None],
    },
)
"""The body of `POST /pushers/set`, as the client sent it (`kind: null` deletes)."""

Pusher = TypedDict(
    "Pusher",
    {
        "pushkey": str,
        "kind": str,
        "app_id": str,
        "app_display_name": str,
        "device_display_name": str,
        "profile_tag": NotRequired[str],
        "lang": str,
        "data": JsonObject,
        "enabled": bool,
        "org.matrix.msc3881.enabled": bool,
        "device_id": NotRequired[str],
        "org.matrix.msc3881.device_id": NotRequired[str],
    },
)
"""A pusher as `get_pushers` answers it."""


class PushersBody(TypedDict):
    """`get_pushers`."""

    pushers: list[Pusher]


class DeletedBody(TypedDict):
    """`delete_pushers`: how many pushers went."""

    deleted: int


# ---- evaluate ----------------------------------------------------------------


class EvaluationEvent(TypedDict):
    """The event in client format; any other key is kept and can be matched."""

    type: str
    room_id: str
    sender: str
    content: JsonObject
    state_key: NotRequired[str]
    event_id: NotRequired[str]


class EvaluationRoom(TypedDict):
    member_count: int
    sender_power_level: NotRequired[int | None]
    notification_power_levels: NotRequired[dict[str, int]]


class EvaluationRecipient(TypedDict):
    user_id: str
    display_name: NotRequired[str]


class RecipientsOfServer(TypedDict):
    """One group of `recipients_by_server`: `@<localpart>:<server>` each."""

    server: str
    localparts: list[str]
    display_names: NotRequired[list[str | None]]


class EvaluateEntry(TypedDict):
    """The single form without `op`; also each entry of the batch form's `events`."""

    event: EvaluationEvent
    room: EvaluationRoom
    recipients: NotRequired[list[EvaluationRecipient]]
    recipients_by_server: NotRequired[list[RecipientsOfServer]]
    explain: NotRequired[bool]
    compact: NotRequired[bool]
    runs: NotRequired[bool]


class EvaluateReply(TypedDict):
    """`evaluate`'s default form: only the notified, by user ID."""

    notify: dict[str, list[PushAction]]
    evaluated: int
    rule_ids: NotRequired[dict[str, str | None]]


class NotifyGroup(TypedDict):
    """A group of the compact reply: `user_ids` (with `compact`) or `runs` (with `runs`)."""

    actions: list[PushAction]
    user_ids: NotRequired[list[str]]
    runs: NotRequired[list[int]]


class EvaluateCompactReply(TypedDict):
    notify_groups: list[NotifyGroup]
    evaluated: int
    rule_ids: NotRequired[dict[str, str | None]]


# ---- notify (docs/delivery.md, the notify message on the wire) ---------------


class NotifyNotification(TypedDict, total=False):
    """Every field optional; no `event_id`: a badge update."""

    event_id: str
    room_id: str
    type: str
    sender: str
    sender_display_name: str
    room_name: str
    room_alias: str
    content: JsonObject
    prio: Literal["high", "low"]


class NotifyCounts(TypedDict, total=False):
    unread: int
    missed_calls: int


class NotifyRecipient(TypedDict):
    user_id: str
    actions: NotRequired[list[PushAction]]
    """Absent: `["notify"]`."""
    counts: NotRequired[NotifyCounts]
    user_is_target: NotRequired[bool]


class NotifyReply(TypedDict):
    """The reply to a `notify` that asked for one."""

    recipients: int
    devices: int
    pending: NotRequired[int]


# ---- The reply envelope ------------------------------------------------------

ErrorKind = Literal[
    "NotFound",
    "InvalidParam",
    "MissingParam",
    "BadJson",
    "Unrecognized",
    "Forbidden",
    "TooLarge",
    "Database",
    "Internal",
    "Unavailable",
]


class ErrorBody(TypedDict):
    kind: ErrorKind
    errcode: str
    error: str
    status: int


class SuccessReply(TypedDict):
    ok: Literal[True]
    body: Any


class FailureReply(TypedDict):
    ok: Literal[False]
    error: ErrorBody


Reply = SuccessReply | FailureReply
"""`{"ok": true, "body": …}` or `{"ok": false, "error": {kind, errcode, error, status}}`."""

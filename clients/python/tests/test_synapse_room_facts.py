"""What the Synapse module tells the pool about the room and hands to `notify`: the facts Synapse's
evaluator reads (member count, power levels, display names) and what its HTTP pusher sends."""

from __future__ import annotations

from typing import Any

import pytest

from matrix_push_worker.synapse_event_plan import (
    EventPush,
    ignores,
    invites_blocked,
    message_id,
    notify_messages,
    plan_event,
    thaw,
)
from matrix_push_worker.synapse_power_levels import CREATOR_POWER_LEVEL

from .synapse_builders import (
    SERVER,
    V1,
    V10,
    V11,
    V12,
    Event,
    Frozen,
    Metadata,
    Unsigned,
    Version,
    member_event,
    message,
    room,
    state_event,
)

ALICE = f"@alice:{SERVER}"
BOB = f"@bob:{SERVER}"
CAROL = f"@carol:{SERVER}"


def planned(event: Event, state: dict[tuple[str, str], Event], include_content: bool = True) -> EventPush:
    result = plan_event(event, state, SERVER, include_content=include_content)
    assert isinstance(result, EventPush)
    return result


def test_member_count_counts_every_joined_member_of_any_server() -> None:
    state = room((ALICE, "join"), (BOB, "join"), ("@eve:elsewhere.test", "join"), (CAROL, "invite"))
    assert planned(message(ALICE), state).room["member_count"] == 3


def test_display_names_come_from_the_members_state() -> None:
    state = room((ALICE, "join", "Alice"), (BOB, "join", "Bobby"), (CAROL, "join", ""))
    assert list(planned(message(ALICE), state).recipients) == [
        {"user_id": BOB, "display_name": "Bobby"},
        {"user_id": CAROL},
    ]


def test_an_invitee_not_joined_is_named_by_the_invite() -> None:
    invite = member_event(ALICE, CAROL, "invite", content={"displayname": "Caz"})
    assert list(planned(invite, room((ALICE, "join"))).recipients) == [
        {"user_id": CAROL, "display_name": "Caz"}
    ]


@pytest.mark.parametrize(
    ("version", "create_content", "power_levels", "sender", "level"),
    [
        pytest.param(V10, None, {"users": {BOB: 50}}, BOB, 50, id="the sender's own level"),
        pytest.param(V10, None, {"users": {}, "users_default": 10}, BOB, 10, id="users_default"),
        pytest.param(V10, None, {"users": {}}, BOB, 0, id="no users_default: 0"),
        pytest.param(V10, None, {"users_default": None}, BOB, 0, id="users_default null: 0"),
        pytest.param(V1, None, {"users": {BOB: "50"}}, BOB, 50, id="a string level in an old room version"),
        pytest.param(V1, None, {"users": {BOB: "high"}}, BOB, None, id="a level that is no number: none"),
        pytest.param(V10, None, None, ALICE, 100, id="no power levels: the creator (content.creator) 100"),
        pytest.param(V10, None, None, BOB, 0, id="no power levels: anyone else 0"),
        pytest.param(V11, {}, None, ALICE, 100, id="no power levels, v11: the create event's sender 100"),
        pytest.param(
            V12, {}, {"users": {}}, ALICE, CREATOR_POWER_LEVEL, id="v12: a creator outranks every level"
        ),
        pytest.param(
            V12,
            {"additional_creators": [BOB]},
            {"users": {BOB: 0}},
            BOB,
            CREATOR_POWER_LEVEL,
            id="v12: additional",
        ),
        pytest.param(
            V11, {"additional_creators": [BOB]}, {"users": {BOB: 5}}, BOB, 5, id="v11: no such creators"
        ),
    ],
)
def test_sender_power_level(
    version: Version,
    create_content: dict[str, Any] | None,
    power_levels: dict[str, Any] | None,
    sender: str,
    level: int | None,
) -> None:
    state = room(
        (ALICE, "join"),
        (BOB, "join"),
        (CAROL, "join"),
        create_content=create_content,
        power_levels=power_levels,
    )
    facts = planned(message(sender, room_version=version), state).room
    assert facts.get("sender_power_level") == level


@pytest.mark.parametrize(
    ("version", "notifications", "expected"),
    [
        pytest.param(V10, {"room": 20}, {"room": 20}, id="integers as they are"),
        pytest.param(V1, {"room": "20", "x": 1.5}, {"room": 20, "x": 1}, id="old rooms: read as integers"),
        pytest.param(V1, {"room": "loud", "x": None}, {}, id="old rooms: what is no number left out"),
        pytest.param(V10, {"room": "20"}, {}, id="integer rooms: no integer left out (the pool takes none)"),
        pytest.param(V10, "not an object", {}, id="not an object: none"),
    ],
)
def test_notification_power_levels(version: Version, notifications: object, expected: dict[str, int]) -> None:
    state = room((ALICE, "join"), (BOB, "join"), power_levels={"notifications": notifications})
    assert planned(message(ALICE, room_version=version), state).room["notification_power_levels"] == expected


def test_an_out_of_band_invite_has_no_power_levels() -> None:
    invite = member_event("@eve:elsewhere.test", CAROL, "invite", internal_metadata=Metadata(True, True))
    assert planned(invite, {}).room == {"member_count": 0}


@pytest.mark.parametrize(
    ("extra", "room_name"),
    [
        pytest.param(
            {"name": {"name": "Team"}, "alias": {"alias": "#team:hs.test"}}, "Team", id="the name first"
        ),
        pytest.param(
            {"name": {"name": ""}, "alias": {"alias": "#team:hs.test"}}, "#team:hs.test", id="then the alias"
        ),
        pytest.param({"alias": {"alias": "team"}}, None, id="an alias that is no alias: none"),
        pytest.param({}, None, id="neither: none (no name from the members)"),
    ],
)
def test_room_name(extra: dict[str, dict[str, Any]], room_name: str | None) -> None:
    state = room((ALICE, "join"), (BOB, "join"))
    if "name" in extra:
        state[("m.room.name", "")] = state_event("m.room.name", extra["name"])
    if "alias" in extra:
        state[("m.room.canonical_alias", "")] = state_event("m.room.canonical_alias", extra["alias"])
    assert planned(message(ALICE), state).notification.get("room_name") == room_name


@pytest.mark.parametrize(
    ("alice", "name"),
    [
        pytest.param((ALICE, "join", "Alice"), "Alice", id="the sender's display name"),
        pytest.param((ALICE, "join"), ALICE, id="none: the sender's user ID"),
    ],
)
def test_sender_display_name(alice: tuple[str, ...], name: str) -> None:
    state = room(alice, (BOB, "join"))  # type: ignore[arg-type]
    assert planned(message(ALICE), state).notification.get("sender_display_name") == name


def test_an_out_of_band_invite_takes_names_from_the_state_that_came_with_it() -> None:
    stripped = [
        {"type": "m.room.name", "state_key": "", "content": {"name": "Elsewhere"}},
        {"type": "m.room.member", "state_key": "@eve:elsewhere.test", "content": {"displayname": "Eve"}},
    ]
    invite = member_event(
        "@eve:elsewhere.test",
        CAROL,
        "invite",
        internal_metadata=Metadata(True, True),
        unsigned=Unsigned({"invite_room_state": stripped}),
    )
    notification = planned(invite, {}).notification
    assert (notification.get("room_name"), notification.get("sender_display_name")) == ("Elsewhere", "Eve")


def test_the_notification_carries_the_event_and_its_content_unless_told_not_to() -> None:
    state = room((ALICE, "join"), (BOB, "join"))
    event = message(ALICE, content=Frozen({"body": "hi", "m.mentions": Frozen({"user_ids": (BOB,)})}))
    with_content = planned(event, state).notification
    assert with_content == {
        "event_id": "$event",
        "room_id": f"!room:{SERVER}",
        "type": "m.room.message",
        "sender": ALICE,
        "sender_display_name": ALICE,
        "content": {"body": "hi", "m.mentions": {"user_ids": [BOB]}},
    }
    assert "content" not in planned(event, state, include_content=False).notification
    assert "content" not in planned(message(ALICE, content=Frozen({})), state).notification


def test_the_evaluated_event_is_its_client_form() -> None:
    redaction = message(ALICE, type="m.room.redaction", redacts="$old", content=Frozen({}))
    assert planned(redaction, room((ALICE, "join"), (BOB, "join"))).event == {
        "event_id": "$event",
        "type": "m.room.redaction",
        "room_id": f"!room:{SERVER}",
        "sender": ALICE,
        "origin_server_ts": 1_700_000_000_000,
        "content": {},
        "redacts": "$old",
    }


def test_notify_messages_keep_the_recipients_order_and_mark_a_membership_target() -> None:
    state = room((ALICE, "join"), (BOB, "join"), (CAROL, "join"))
    push = planned(message(ALICE), state)
    messages = notify_messages(
        push, {CAROL: ["notify"], BOB: ["notify", {"set_tweak": "sound", "value": "d"}]}
    )
    assert messages == [
        (
            "$event/0",
            [
                {"user_id": BOB, "actions": ["notify", {"set_tweak": "sound", "value": "d"}]},
                {"user_id": CAROL, "actions": ["notify"]},
            ],
        )
    ]
    kick = planned(member_event(ALICE, BOB, "leave"), state)
    assert notify_messages(kick, {BOB: ["notify"]}) == [
        ("$event/0", [{"user_id": BOB, "actions": ["notify"], "user_is_target": True}])
    ]
    assert notify_messages(push, {}) == []


def test_a_large_room_is_notified_in_messages_of_10000_each_named_by_their_index() -> None:
    members = [(f"@u{index:05d}:{SERVER}", "join") for index in range(25_000)]
    push = planned(message(ALICE), room((ALICE, "join"), *members))
    messages = notify_messages(push, {user: ["notify"] for user, _ in members})
    assert [(name, len(recipients)) for name, recipients in messages] == [
        ("$event/0", 10_000),
        ("$event/1", 10_000),
        ("$event/2", 5_000),
    ]


def test_a_message_id_too_long_for_amqp_names_the_event_by_its_hash() -> None:
    long_id = "$" + "x" * 254
    assert message_id("$short", 3) == "$short/3"
    named = message_id(long_id, 0)
    assert named.startswith("sha256:")
    assert named.endswith("/0")
    assert len(named.encode()) <= 255
    assert named == message_id(long_id, 0) != message_id(long_id, 1)


@pytest.mark.parametrize(
    ("account_data", "ignored"),
    [
        ({"ignored_users": {ALICE: {}}}, True),
        ({"ignored_users": {BOB: {}}}, False),
        ({"ignored_users": [ALICE]}, False),
        ({}, False),
        (None, False),
    ],
)
def test_ignores(account_data: dict[str, Any] | None, ignored: bool) -> None:
    assert ignores(account_data, ALICE) is ignored


@pytest.mark.parametrize(
    ("account_data", "blocked"),
    [({"default_action": "block"}, True), ({"default_action": "allow"}, False), ({}, False), (None, False)],
)
def test_invites_blocked(account_data: dict[str, Any] | None, blocked: bool) -> None:
    assert invites_blocked(account_data) is blocked


def test_thaw_copies_immutable_json_into_plain_json() -> None:
    assert thaw(Frozen({"a": (1, Frozen({"b": None})), "c": "s"})) == {"a": [1, {"b": None}], "c": "s"}

"""Who the Synapse module asks the pool about for an event: Synapse's own push path's choice
(synapse/push/bulk_push_rule_evaluator.py), and what it leaves for Synapse to check after."""

from __future__ import annotations

from dataclasses import replace

import pytest

from matrix_push_worker.synapse_event_plan import Checks, EventPush, JoinedBefore, Skipped, plan_event

from .synapse_builders import SERVER, Event, Metadata, Unsigned, member_event, message, room, state_event

ALICE = f"@alice:{SERVER}"
BOB = f"@bob:{SERVER}"
CAROL = f"@carol:{SERVER}"
DAVE = f"@dave:{SERVER}"
REMOTE = "@eve:elsewhere.test"

# Alice, Bob and Carol joined, Dave invited, Erin gone, Eve joined from another server.
ROOM = room(
    (ALICE, "join"),
    (CAROL, "join"),
    (BOB, "join"),
    (DAVE, "invite"),
    (f"@erin:{SERVER}", "leave"),
    (REMOTE, "join"),
)


def plan(event: Event, state: object = ROOM) -> EventPush | Skipped:
    return plan_event(event, state, SERVER)  # type: ignore[arg-type]


def recipients_of(result: EventPush | Skipped) -> list[str] | str:
    if isinstance(result, Skipped):
        return f"skipped: {result.reason}"
    return [recipient["user_id"] for recipient in result.recipients]


@pytest.mark.parametrize(
    ("event", "expected"),
    [
        pytest.param(message(ALICE), [BOB, CAROL], id="a message: the local joined members but the sender"),
        pytest.param(
            message(REMOTE), [ALICE, BOB, CAROL], id="a message from another server: every local member"
        ),
        pytest.param(
            state_event("m.room.topic", {"topic": "t"}, sender=BOB),
            [ALICE, CAROL],
            id="a state event, as a message",
        ),
        pytest.param(
            member_event(ALICE, DAVE, "invite"), [DAVE], id="an invite: its target alone, not the members"
        ),
        pytest.param(member_event(ALICE, BOB, "ban"), [BOB], id="a ban by someone else: its target alone"),
        pytest.param(member_event(BOB, BOB, "leave"), "skipped: no-recipients", id="leaving: nobody"),
        pytest.param(member_event(CAROL, CAROL, "join"), "skipped: no-recipients", id="joining: nobody"),
        pytest.param(
            member_event(ALICE, REMOTE, "invite"), "skipped: no-recipients", id="inviting a remote user"
        ),
        pytest.param(
            message(ALICE, internal_metadata=Metadata(outlier=True)),
            "skipped: not-notifiable",
            id="an outlier (no state): never",
        ),
        pytest.param(
            member_event(
                REMOTE, DAVE, "invite", internal_metadata=Metadata(outlier=True, out_of_band_membership=True)
            ),
            [DAVE],
            id="an invite from another server (out of band): its target",
        ),
        pytest.param(
            message(ALICE, internal_metadata=Metadata(soft_failed=True)),
            "skipped: soft-failed",
            id="a soft-failed event: never",
        ),
        pytest.param(message(ALICE, type="m.room.dummy"), "skipped: hidden-type", id="m.room.dummy: never"),
        pytest.param(
            message(ALICE, type="m.room.aliases"), "skipped: hidden-type", id="m.room.aliases: never"
        ),
    ],
)
def test_recipients(event: Event, expected: list[str] | str) -> None:
    assert recipients_of(plan(event)) == expected


def test_a_room_where_the_sender_is_alone_notifies_nobody() -> None:
    assert (
        recipients_of(plan(message(ALICE), room((ALICE, "join"), (REMOTE, "join"))))
        == "skipped: no-recipients"
    )


@pytest.mark.parametrize(
    ("event", "checks"),
    [
        pytest.param(
            message(ALICE), Checks(ignored_sender=ALICE), id="a message: whoever ignores the sender"
        ),
        pytest.param(
            state_event("m.room.name", {"name": "n"}), Checks(), id="a state event: no ignore check"
        ),
        pytest.param(
            member_event(ALICE, DAVE, "invite"), Checks(invitee=DAVE), id="an invite: the invitee's rules"
        ),
        pytest.param(
            member_event(ALICE, BOB, "leave", unsigned=Unsigned({"replaces_state": "$bob-join"})),
            Checks(joined_before=JoinedBefore(BOB, "$bob-join")),
            id="a kick: was the target joined before",
        ),
        pytest.param(
            member_event(ALICE, f"@frank:{SERVER}", "ban"),
            Checks(joined_before=JoinedBefore(f"@frank:{SERVER}", None)),
            id="a ban of someone never in the room: no earlier membership",
        ),
    ],
)
def test_checks_left_for_synapse(event: Event, checks: Checks) -> None:
    result = plan(event)
    assert isinstance(result, EventPush)
    assert result.checks == checks


def test_membership_events_mark_their_target() -> None:
    invite = plan(member_event(ALICE, DAVE, "invite"))
    assert isinstance(invite, EventPush)
    assert invite.target == DAVE
    plain = plan(message(ALICE))
    assert isinstance(plain, EventPush)
    assert plain.target is None


def test_recipients_are_in_a_stable_order_whatever_the_state_order() -> None:
    reversed_room = dict(reversed(list(ROOM.items())))
    assert recipients_of(plan(message(ALICE), reversed_room)) == recipients_of(plan(message(ALICE)))


def test_an_event_of_the_server_name_prefix_is_not_local() -> None:
    longer = f"@mallory:{SERVER}.evil"
    state = room((ALICE, "join"), (BOB, "join"), (longer, "join"))
    assert recipients_of(plan(message(ALICE), state)) == [BOB]


def test_the_plan_is_plain_data_for_another_thread() -> None:
    result = plan(replace(message(ALICE), content=message(ALICE).content))
    assert isinstance(result, EventPush)
    assert type(result.event["content"]) is dict
    assert result.size > 0

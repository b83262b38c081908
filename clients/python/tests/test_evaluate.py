"""evaluate and evaluate_many against a real worker: the default shape whatever the wire form."""

from __future__ import annotations

from typing import Any

import pytest

from matrix_push_worker import EvaluateManyEvent, PushRulesClient, PushRulesError
from matrix_push_worker.wire_types import EvaluationRoom

from .conftest import known_user, new_user


def room(members: int = 10) -> EvaluationRoom:
    return {"member_count": members, "sender_power_level": 0, "notification_power_levels": {"room": 50}}


def message(sender: str, body: str) -> Any:
    return {
        "type": "m.room.message",
        "room_id": "!room:example.org",
        "sender": sender,
        "content": {"msgtype": "m.text", "body": body},
    }


async def test_evaluate_names_the_notified_and_their_rule(client: PushRulesClient) -> None:
    sender, alice, bob = new_user("sender"), await known_user(client, "alice"), new_user("bob")
    await client.set_push_rule(alice, "global", "content", "kw-pizza", {"pattern": "pizza", "actions": []})
    recipients: Any = [{"user_id": sender}, {"user_id": alice}, {"user_id": bob, "display_name": "Bob"}]

    answer = await client.evaluate(message(sender, "pizza tonight?"), room(), recipients, explain=True)

    assert answer == {
        "notify": {bob: ["notify"]},
        "evaluated": 3,
        "rule_ids": {sender: None, alice: "kw-pizza", bob: ".m.rule.message"},
    }


async def test_a_large_room_over_several_servers_is_decoded_by_position(client: PushRulesClient) -> None:
    # From 100 recipients they go grouped by server and the reply names them by position in the
    # grouped order, which is not the order given here: the decoding must map positions back.
    sender = new_user("sender")
    quiet = await known_user(client, "quiet")
    await client.set_push_rule(quiet, "global", "override", "mute", {"conditions": [], "actions": []})
    crowd = [f"@member{index}:server{index % 3}.example.org" for index in range(150)]
    recipients: Any = [{"user_id": user} for user in [*crowd[:75], quiet, *crowd[75:]]]

    answer = await client.evaluate(message(sender, "hello"), room(152), recipients)

    assert answer["evaluated"] == 151
    assert answer["notify"] == {user: ["notify"] for user in crowd}


async def test_evaluate_many_answers_each_event_on_its_own(client: PushRulesClient) -> None:
    sender, bob = new_user("sender"), new_user("bob")
    good: EvaluateManyEvent = {
        "event": message(sender, "one"),
        "room": room(),
        "recipients": [{"user_id": bob}],
    }
    bad: EvaluateManyEvent = {
        "event": message(sender, "two"),
        "room": room(),
        "recipients": [{"user_id": "not a user"}],
    }

    explained: EvaluateManyEvent = {**good, "explain": True}
    answers = await client.evaluate_many([good, bad, explained])

    assert answers[0] == {"notify": {bob: ["notify"]}, "evaluated": 1}
    assert isinstance(answers[1], PushRulesError)
    assert answers[1].errcode == "M_BAD_JSON"
    assert answers[2] == {"notify": {bob: ["notify"]}, "evaluated": 1, "rule_ids": {bob: ".m.rule.message"}}


async def test_a_bad_evaluate_raises_its_matrix_error(client: PushRulesClient) -> None:
    event = message(new_user("sender"), "x")
    with pytest.raises(PushRulesError) as refused:
        await client.evaluate(event, {"member_count": -1}, [])
    assert (refused.value.kind, refused.value.status) == ("BadJson", 400)

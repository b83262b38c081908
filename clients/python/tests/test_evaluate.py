"""evaluate and evaluate_many against a real worker: the default shape whatever the wire form."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable
from typing import Any

import pytest

from matrix_push_worker import EvaluateManyEvent, PushRulesClient, PushRulesError
from matrix_push_worker.wire_types import EvaluateReply, EvaluationRoom, Reply

from .conftest import Worker, client_for, known_user, new_user


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


@pytest.mark.parametrize("coalescing", [True, False], ids=["coalesced", "each-alone"])
async def test_many_concurrent_evaluate_calls_are_each_answered_with_their_own_event(
    worker: Worker, coalescing: bool
) -> None:
    async with client_for(worker.names, evaluate_coalescing=coalescing) as client:
        forms = spy_on_evaluate_forms(client)
        sender, picky = new_user("sender"), await known_user(client, "picky")
        await client.set_push_rule(picky, "global", "content", "hush", {"pattern": "quiet", "actions": []})
        fresh = [new_user(f"fresh{index}") for index in range(96)]

        def call(index: int) -> Awaitable[EvaluateReply]:
            body = f"quiet {index}" if index % 2 == 0 else f"loud {index}"
            recipients: Any = [{"user_id": picky}, {"user_id": fresh[index]}]
            if index == 7:
                recipients.append({"user_id": "not a user"})
            return client.evaluate(message(sender, body), room(), recipients)

        answers = await asyncio.gather(*(call(index) for index in range(96)), return_exceptions=True)

    for index, answer in enumerate(answers):
        if index == 7:
            assert isinstance(answer, PushRulesError)
            assert answer.errcode == "M_BAD_JSON"
            continue
        notified = (
            {fresh[index]: ["notify"]} if index % 2 == 0 else {picky: ["notify"], fresh[index]: ["notify"]}
        )
        assert answer == {"notify": notified, "evaluated": 2}
    # Coalesced, callers that found one out shared messages of the batch form; else each went alone.
    assert ("batch" in forms) is coalescing
    assert forms.count("single") >= 1


def spy_on_evaluate_forms(client: PushRulesClient) -> list[str]:
    """Which form each evaluate message went in ("single" or "batch"), in order."""
    forms: list[str] = []
    request = client._rpc.request

    async def recording(body: Any, **options: Any) -> Reply:
        if options.get("queue") == client._evaluate_queue:
            text = body if isinstance(body, bytes) else json.dumps(body).encode()
            forms.append("batch" if b'"events":[' in text else "single")
        return await request(body, **options)

    client._rpc.request = recording  # type: ignore[method-assign]
    return forms

"""notify hands a notification to the workers, who push it to the user's gateway."""

from __future__ import annotations

import asyncio
from typing import Any

from matrix_push_worker import PushRulesClient
from matrix_push_worker.wire_types import NotifyNotification, NotifyRecipient

from .conftest import new_user
from .push_gateway import PushGateway


def message(event_id: str) -> NotifyNotification:
    return {
        "event_id": event_id,
        "room_id": "!room:example.org",
        "type": "m.room.message",
        "sender": "@alice:example.org",
        "content": {"msgtype": "m.text", "body": "hi"},
    }


async def test_notify_reaches_the_recipients_gateway(client: PushRulesClient, gateway: PushGateway) -> None:
    bob = new_user("bob")
    pusher: Any = {
        "pushkey": "bob-phone",
        "kind": "http",
        "app_id": "org.example.app",
        "app_display_name": "Example",
        "device_display_name": "Phone",
        "lang": "en",
        "data": {"url": gateway.url},
    }
    await client.set_pusher(bob, pusher, device_id="PHONE")
    recipients: list[NotifyRecipient] = [{"user_id": bob, "actions": ["notify"], "counts": {"unread": 1}}]

    answer = await client.notify(message("$first"), recipients, reply=True)
    assert answer == {"recipients": 1, "devices": 1}
    first = await asyncio.wait_for(gateway.received.get(), 30)
    assert first["notification"]["event_id"] == "$first"
    assert first["notification"]["devices"][0]["pushkey"] == "bob-phone"

    await client.notify(message("$second"), recipients)  # resolved on the broker's confirm
    second = await asyncio.wait_for(gateway.received.get(), 30)
    assert second["notification"]["event_id"] == "$second"

    # The same message_id again schedules nothing twice.
    again = await client.notify(message("$third"), recipients, message_id="n-3", reply=True)
    repeat = await client.notify(message("$third"), recipients, message_id="n-3", reply=True)
    assert again == repeat == {"recipients": 1, "devices": 1}
    third = await asyncio.wait_for(gateway.received.get(), 30)
    assert third["notification"]["event_id"] == "$third"
    # One device's pushes go in publish order: a second $third would come before $fourth.
    await client.notify(message("$fourth"), recipients, reply=True)
    fourth = await asyncio.wait_for(gateway.received.get(), 30)
    assert fourth["notification"]["event_id"] == "$fourth"

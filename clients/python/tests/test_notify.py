"""notify hands a notification to the workers, who push it to the user's gateway."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio

from matrix_push_worker import PushRulesClient
from matrix_push_worker.wire_types import NotifyNotification, NotifyRecipient

from .conftest import new_user


class PushGateway:
    """A push gateway on 127.0.0.1 that accepts every notification and keeps it."""

    def __init__(self) -> None:
        self.received: asyncio.Queue[Any] = asyncio.Queue()
        self.url = ""

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = 0
        for line in head.decode().split("\r\n"):
            name, _, value = line.partition(":")
            if name.lower() == "content-length":
                length = int(value)
        body = await reader.readexactly(length)
        await self.received.put(json.loads(body))
        answer = b'{"rejected":[]}'
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
            + f"Content-Length: {len(answer)}\r\n\r\n".encode()
            + answer
        )
        await writer.drain()
        writer.close()


def message(event_id: str) -> NotifyNotification:
    return {
        "event_id": event_id,
        "room_id": "!room:example.org",
        "type": "m.room.message",
        "sender": "@alice:example.org",
        "content": {"msgtype": "m.text", "body": "hi"},
    }


@pytest_asyncio.fixture
async def gateway() -> AsyncIterator[PushGateway]:
    gateway = PushGateway()
    server = await asyncio.start_server(gateway.handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    gateway.url = f"http://127.0.0.1:{port}/_matrix/push/v1/notify"
    async with server:
        yield gateway


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

"""The transport: deadlines, unroutable requests, many calls on one connection, several nodes."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import aio_pika
import pytest
import pytest_asyncio

from matrix_push_worker import PushRulesClient, PushRulesError

from .conftest import AMQP_URL, Names, Worker, client_for, known_user, new_user


@pytest_asyncio.fixture
async def unserved_queue() -> AsyncIterator[str]:
    """A queue nobody consumes (declared by the test, never by the client)."""
    name = f"pyclient.unserved.{uuid.uuid4().hex[:8]}"
    connection = await aio_pika.connect(AMQP_URL)
    async with connection:
        channel = await connection.channel()
        await channel.declare_queue(name, auto_delete=False, durable=False)
        try:
            yield name
        finally:
            await channel.queue_delete(name)


async def test_a_call_with_no_reply_fails_at_its_deadline(worker: Worker, unserved_queue: str) -> None:
    async with client_for(worker.names, queue=unserved_queue, read_queue=None) as client:
        with pytest.raises(PushRulesError) as failed:
            await client.get_push_rules(new_user("timeout"), timeout=0.5)
    assert failed.value.reason == "timeout"
    assert (failed.value.kind, failed.value.status, failed.value.errcode) == ("Unavailable", 503, "M_UNKNOWN")


async def test_a_request_no_queue_takes_fails_as_unroutable(worker: Worker) -> None:
    async with client_for(
        worker.names, queue=f"pyclient.absent.{uuid.uuid4().hex[:8]}", read_queue=None
    ) as client:
        with pytest.raises(PushRulesError) as failed:
            await client.set_push_rule_enabled(
                new_user("nobody"), "global", "override", ".m.rule.master", True
            )
    assert failed.value.reason == "unroutable"


async def test_a_body_that_is_not_json_fails_alone(client: PushRulesClient) -> None:
    user = await known_user(client, "unserializable")
    with pytest.raises(PushRulesError) as failed:
        await client.set_push_rule(user, "global", "content", "r", {"pattern": "p", "actions": [{1, 2}]})  # type: ignore[list-item]
    assert (failed.value.errcode, failed.value.reason) == ("M_BAD_JSON", None)
    assert await client.get_push_rule_enabled(user, "global", "override", ".m.rule.master") == {
        "enabled": False
    }


async def test_many_calls_in_parallel_share_one_connection_and_each_gets_its_own_reply(
    client: PushRulesClient,
) -> None:
    users = [new_user(f"parallel{index}") for index in range(40)]

    async def write_then_read(index: int, user: str) -> Any:
        rule: Any = {"pattern": f"word{index}", "actions": ["notify"]}
        await client.get_push_rules(user)
        await client.set_push_rule(user, "global", "content", "mine", rule)
        return await client.get_push_rule(user, "global", "content", "mine")

    node = client.broker
    rules = await asyncio.gather(*(write_then_read(index, user) for index, user in enumerate(users)))
    readers = await asyncio.gather(
        *(client.get_push_rule_actions(user, "global", "content", "mine") for user in users for _ in range(5))
    )

    assert [rule["pattern"] for rule in rules] == [f"word{index}" for index in range(40)]
    assert readers == [{"actions": ["notify"]}] * 200
    assert client.broker == node


async def test_a_node_that_does_not_answer_is_passed_over(names: Names, worker: Worker) -> None:
    # A port nothing listens on: refused at once, and the client goes on to the next node, whichever
    # of the two the shuffled order tries first.
    dead = "amqp://guest:guest@127.0.0.1:1"
    async with client_for(names, url=[dead, AMQP_URL]) as client:
        for _ in range(3):
            assert "global" in await client.get_push_rules(new_user("cluster"))
        live = urlsplit(AMQP_URL)
        assert client.broker == f"{live.hostname}:{live.port or 5672}"


async def test_a_closed_client_refuses_calls(names: Names, worker: Worker) -> None:
    client = client_for(names)
    await client.get_pushers(new_user("closing"))
    await client.close()
    await client.close()
    with pytest.raises(PushRulesError) as failed:
        await client.get_pushers(new_user("closed"))
    assert failed.value.reason == "closed"

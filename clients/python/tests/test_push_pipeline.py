"""The Synapse module's own thread against a real worker: an event handed over from another thread is
evaluated and pushed; Synapse's checks leave users out; an unreachable pool is counted, and an event
waiting past its age is dropped; account calls reach the pool."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest_asyncio

from matrix_push_worker import PushRulesClient
from matrix_push_worker.push_pipeline import AccountCall, PipelineSettings, PushPipeline
from matrix_push_worker.synapse_event_plan import Checks, EventPush, plan_event

from .conftest import Worker, client_for, new_user
from .push_gateway import PushGateway
from .synapse_builders import SERVER, message, room

SETTINGS = PipelineSettings(timeout_seconds=15.0, retry_base_seconds=0.05, retry_max_seconds=0.2)


class Clock:
    """Monotonic seconds that the test can move ahead."""

    def __init__(self) -> None:
        self.ahead = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.ahead


@pytest_asyncio.fixture
async def pipelines(worker: Worker) -> AsyncIterator[Callable[..., PushPipeline]]:
    started: list[PushPipeline] = []

    def start(**options: Any) -> PushPipeline:
        url = options.pop("url", None)
        factory = (lambda: client_for(worker.names, url=url)) if url else (lambda: client_for(worker.names))
        pipeline = PushPipeline(options.pop("settings", SETTINGS), factory, **options)
        started.append(pipeline)
        return pipeline

    yield start
    for pipeline in started:
        await asyncio.to_thread(pipeline.close, 10.0)


def a_local_user(name: str) -> str:
    """A user of this test alone, on the server the events come from."""
    return new_user(name).replace(":example.org", f":{SERVER}")


async def a_user_with_a_pusher(client: PushRulesClient, gateway: PushGateway, name: str) -> str:
    user = a_local_user(name)
    pusher: Any = {
        "pushkey": f"{user}-phone",
        "kind": "http",
        "app_id": "org.example.app",
        "app_display_name": "Example",
        "device_display_name": "Phone",
        "lang": "en",
        "data": {"url": gateway.url},
    }
    await client.set_pusher(user, pusher, device_id="PHONE")
    return user


def a_push(sender: str, *members: str, event_id: str = "$event") -> EventPush:
    plan = plan_event(
        message(sender, event_id=event_id), room((sender, "join"), *[(m, "join") for m in members]), SERVER
    )
    assert isinstance(plan, EventPush)
    return plan


def from_another_thread(action: Callable[[], None]) -> None:
    """As Synapse's reactor thread calls the module."""
    thread = threading.Thread(target=action)
    thread.start()
    thread.join()


async def until(check: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "not reached in time"
        await asyncio.sleep(0.02)


async def test_an_event_handed_over_from_another_thread_is_evaluated_and_pushed(
    client: PushRulesClient, gateway: PushGateway, pipelines: Callable[..., PushPipeline]
) -> None:
    alice = a_local_user("alice")
    bob = await a_user_with_a_pusher(client, gateway, "bob")
    pipeline = pipelines()
    from_another_thread(lambda: pipeline.submit_event(a_push(alice, bob, event_id="$handed-over")))
    pushed = await asyncio.wait_for(gateway.received.get(), 30)
    assert pushed["notification"]["event_id"] == "$handed-over"
    assert pushed["notification"]["devices"][0]["pushkey"] == f"{bob}-phone"
    # Two members: the default one-to-one rule, with its sound.
    assert pushed["notification"]["devices"][0]["tweaks"] == {"sound": "default"}
    await until(lambda: pipeline.counters.snapshot()["events_pushed"] == 1)
    assert (len(pipeline.events), pipeline.events.size) == (0, 0)


async def test_synapses_checks_leave_users_out(
    client: PushRulesClient, gateway: PushGateway, pipelines: Callable[..., PushPipeline]
) -> None:
    alice = a_local_user("alice")
    bob = await a_user_with_a_pusher(client, gateway, "bob")
    carol = await a_user_with_a_pusher(client, gateway, "carol")
    asked: list[tuple[Checks, frozenset[str]]] = []

    async def bob_ignores_alice(questions: list[tuple[Checks, frozenset[str]]]) -> list[frozenset[str]]:
        asked.extend(questions)
        return [users - {bob} for _, users in questions]

    pipeline = pipelines(checks=bob_ignores_alice)
    pipeline.submit_event(a_push(alice, bob, carol, event_id="$checked"))
    pushed = await asyncio.wait_for(gateway.received.get(), 30)
    assert pushed["notification"]["devices"][0]["pushkey"] == f"{carol}-phone"
    assert asked == [(Checks(ignored_sender=alice), frozenset({bob, carol}))]
    await until(lambda: pipeline.counters.snapshot()["events_pushed"] == 1)
    assert gateway.received.empty()


async def test_an_event_whose_checks_fail_is_pushed_to_nobody(
    client: PushRulesClient, gateway: PushGateway, pipelines: Callable[..., PushPipeline]
) -> None:
    alice = a_local_user("alice")
    bob = await a_user_with_a_pusher(client, gateway, "bob")

    async def synapse_fails(questions: list[tuple[Checks, frozenset[str]]]) -> list[frozenset[str]]:
        raise RuntimeError("the database is away")

    pipeline = pipelines(checks=synapse_fails)
    pipeline.submit_event(a_push(alice, bob, event_id="$unchecked"))
    await until(lambda: pipeline.counters.snapshot()["events_failed"] == 1)
    # The next event, pushed, would come after it: nothing came before.
    later = pipelines()
    later.submit_event(a_push(alice, bob, event_id="$later"))
    pushed = await asyncio.wait_for(gateway.received.get(), 30)
    assert pushed["notification"]["event_id"] == "$later"


async def test_an_unreachable_pool_is_counted_and_an_event_waiting_past_its_age_dropped(
    pipelines: Callable[..., PushPipeline],
) -> None:
    clock = Clock()
    settings = PipelineSettings(timeout_seconds=2.0, retry_base_seconds=0.05, retry_max_seconds=0.2)
    pipeline = pipelines(url="amqp://guest:guest@127.0.0.1:1", settings=settings, clock=clock)
    pipeline.submit_event(a_push(f"@alice:{SERVER}", f"@bob:{SERVER}"))
    await until(lambda: pipeline.counters.snapshot()["pool_unavailable"] >= 2)
    assert len(pipeline.events) == 1
    clock.ahead = settings.max_age_seconds + 1
    await until(lambda: pipeline.counters.snapshot()["events_expired"] == 1)
    assert (len(pipeline.events), pipeline.events.size) == (0, 0)


async def test_logout_and_deactivation_reach_the_pool(
    client: PushRulesClient, gateway: PushGateway, pipelines: Callable[..., PushPipeline]
) -> None:
    bob = await a_user_with_a_pusher(client, gateway, "bob")
    tablet: Any = {**(await client.get_pushers(bob))["pushers"][0], "pushkey": "tablet"}
    await client.set_pusher(bob, tablet, device_id="TABLET")
    await client.get_push_rules(bob)  # a first read stores the defaults: rules can then be added
    await client.set_push_rule(bob, "global", "override", "mine", {"actions": ["notify"], "conditions": []})
    pipeline = pipelines()
    pipeline.submit_account(AccountCall("delete_pushers", bob, "PHONE"))
    await until(lambda: pipeline.counters.snapshot()["account_calls_done"] == 1)
    assert [pusher["pushkey"] for pusher in (await client.get_pushers(bob))["pushers"]] == ["tablet"]
    pipeline.submit_account(AccountCall("delete_user_data", bob))
    await until(lambda: pipeline.counters.snapshot()["account_calls_done"] == 2)
    assert (await client.get_pushers(bob))["pushers"] == []
    rules = (await client.get_push_rules(bob))["global"]["override"]
    assert "mine" not in [rule["rule_id"] for rule in rules]

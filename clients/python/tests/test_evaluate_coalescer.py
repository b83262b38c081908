"""How `evaluate()` calls are gathered into messages: the rules of docs/client.md's "Many events in
one message", against a stand-in for the RPC (no broker)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from typing import Any, TypeVar, cast

import pytest

from matrix_push_worker.client import PushRulesClient
from matrix_push_worker.errors import PushRulesError
from matrix_push_worker.evaluate_coalescer import EvaluateCoalescer, EvaluateCoalescing, nests_deeper_than
from matrix_push_worker.wire_types import EvaluateEntry, Reply

T = TypeVar("T")


class Worker:
    """Takes the messages sent; the test answers each when it likes."""

    def __init__(self) -> None:
        self.sent: list[tuple[dict[str, Any], float]] = []
        self.replies: list[asyncio.Future[Reply]] = []
        self.callers: list[asyncio.Task[Any]] = []

    def call(self, evaluate: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """A caller, as a task of its own (held here until the test ends)."""
        caller = asyncio.create_task(evaluate)
        self.callers.append(caller)
        return caller

    async def send(self, body: Any, timeout: float) -> Reply:
        self.sent.append((json.loads(body) if isinstance(body, bytes) else body, timeout))
        reply: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self.replies.append(reply)
        return await reply

    def events_of(self, message: int) -> list[str]:
        """The event IDs message `message` carries, in order."""
        body = self.sent[message][0]
        entries = body.get("events", [body])
        return [entry["event"]["event_id"] for entry in entries]

    def answer_each(self, message: int) -> None:
        """Answers every event of `message` with its own body: `{"for": event_id}`."""
        body = self.sent[message][0]
        results = [ok({"for": event_id}) for event_id in self.events_of(message)]
        self.replies[message].set_result(ok({"results": results}) if "events" in body else results[0])


def ok(body: object) -> Reply:
    return cast(Reply, {"ok": True, "body": body})


def refused(kind: str) -> Reply:
    return cast(Reply, {"ok": False, "error": {"kind": kind, "errcode": "M_X", "status": 400, "error": kind}})


def entry(event_id: str, recipients: int = 1, content: object = "hi") -> EvaluateEntry:
    users = [{"user_id": f"@u{i}:hs"} for i in range(recipients)]
    return cast(
        EvaluateEntry,
        {"event": {"event_id": event_id, "content": {"body": content}}, "room": {}, "recipients": users},
    )


def coalescer(worker: Worker, timeout: float = 5.0, **settings: Any) -> EvaluateCoalescer:
    return EvaluateCoalescer(worker.send, timeout, EvaluateCoalescing(**settings))


async def turns(count: int = 3) -> None:
    for _ in range(count):
        await asyncio.sleep(0)


async def two_waiting_sent_as_one(worker: Worker, calls: EvaluateCoalescer) -> list[asyncio.Task[Any]]:
    """`$a` goes alone; `$b0` and `$b1`, called while it is out, go as message 1 once it is answered."""
    worker.call(calls.evaluate(entry("$a")))
    await turns()
    waiting = [worker.call(calls.evaluate(entry(f"$b{i}"))) for i in range(2)]
    await turns()
    worker.answer_each(0)
    await turns()
    return waiting


async def test_a_call_while_nothing_is_out_goes_at_once_alone_in_the_single_form() -> None:
    worker = Worker()
    calls = coalescer(worker)
    call = worker.call(calls.evaluate(entry("$a")))
    await turns()
    assert worker.sent[0][0]["op"] == "evaluate"
    assert "events" not in worker.sent[0][0]
    worker.answer_each(0)
    assert await call == ok({"for": "$a"})


async def test_calls_made_while_one_is_out_go_together_when_it_is_answered() -> None:
    worker = Worker()
    calls = coalescer(worker, window=10.0)
    first = worker.call(calls.evaluate(entry("$a")))
    await turns()
    waiting = [worker.call(calls.evaluate(entry(f"$b{i}"))) for i in range(3)]
    await turns()
    assert len(worker.sent) == 1
    worker.answer_each(0)
    await turns()
    assert worker.events_of(1) == ["$b0", "$b1", "$b2"]
    worker.answer_each(1)
    assert await first == ok({"for": "$a"})
    assert await asyncio.gather(*waiting) == [ok({"for": f"$b{i}"}) for i in range(3)]


async def test_calls_queued_go_after_the_window_when_the_message_out_takes_long() -> None:
    worker = Worker()
    calls = coalescer(worker, window=0.01)
    worker.call(calls.evaluate(entry("$a")))
    await turns()
    waiting = [worker.call(calls.evaluate(entry(f"$b{i}"))) for i in range(2)]
    await asyncio.sleep(0.05)
    assert worker.events_of(1) == ["$b0", "$b1"]
    worker.answer_each(1)
    assert await asyncio.gather(*waiting) == [ok({"for": "$b0"}), ok({"for": "$b1"})]


@pytest.mark.parametrize(
    ("caps", "recipients", "expected"),
    [
        ({"max_events": 2}, 1, [["$b0", "$b1"], ["$b2"]]),
        ({"max_recipients": 5}, 3, [["$b0"], ["$b1"], ["$b2"]]),
        ({"max_bytes": 250}, 1, [["$b0", "$b1"], ["$b2"]]),
    ],
)
async def test_a_queue_at_a_cap_goes_at_once(caps: dict[str, int], recipients: int, expected: Any) -> None:
    worker = Worker()
    calls = coalescer(worker, window=10.0, **caps)
    worker.call(calls.evaluate(entry("$a")))
    await turns()
    for i in range(3):
        worker.call(calls.evaluate(entry(f"$b{i}", recipients)))
    await turns()
    sent_at_once = [worker.events_of(m) for m in range(1, len(worker.sent))]
    assert sent_at_once == expected[:-1]
    # The rest, not at a cap, waits until every message out has been answered (or its window).
    for message in range(len(worker.sent)):
        worker.answer_each(message)
    await turns()
    assert worker.events_of(len(worker.sent) - 1) == expected[-1]


async def test_each_call_gets_its_own_answer_or_its_own_refusal() -> None:
    worker = Worker()
    calls = coalescer(worker, window=10.0)
    worker.call(calls.evaluate(entry("$a")))
    await turns()
    good = worker.call(calls.evaluate(entry("$good")))
    bad = worker.call(calls.evaluate(entry("$bad")))
    await turns()
    worker.answer_each(0)
    await turns()
    worker.replies[1].set_result(ok({"results": [ok({"for": "$good"}), refused("NotFound")]}))
    assert await good == ok({"for": "$good"})
    assert await bad == refused("NotFound")


async def test_a_call_keeps_its_own_timeout_counted_from_the_call() -> None:
    worker = Worker()
    calls = coalescer(worker, window=10.0)
    worker.call(calls.evaluate(entry("$a")))
    await turns()
    short = worker.call(calls.evaluate(entry("$short"), timeout=0.02))
    long = worker.call(calls.evaluate(entry("$long"), timeout=5.0))
    with pytest.raises(PushRulesError) as failure:
        await short
    assert failure.value.reason == "timeout"
    worker.answer_each(0)
    await turns()
    # The one whose time is up is not sent; the message's deadline is the latest call's.
    assert worker.events_of(1) == ["$long"]
    assert 4.0 < worker.sent[1][1] <= 5.0
    worker.answer_each(1)
    assert await long == ok({"for": "$long"})


@pytest.mark.parametrize("kind", ["TooLarge", "BadJson"])
async def test_a_batch_refused_with_too_large_or_bad_json_is_sent_again_each_event_alone(kind: str) -> None:
    worker = Worker()
    calls = coalescer(worker, window=10.0)
    waiting = await two_waiting_sent_as_one(worker, calls)
    worker.replies[1].set_result(refused(kind))
    await turns()
    assert [worker.events_of(m) for m in (2, 3)] == [["$b0"], ["$b1"]]
    assert all("events" not in worker.sent[m][0] for m in (2, 3))
    worker.answer_each(2)
    worker.replies[3].set_result(refused(kind))
    assert await waiting[0] == ok({"for": "$b0"})
    assert await waiting[1] == refused(kind)


async def test_a_batch_refused_as_unavailable_fails_every_event_in_it() -> None:
    worker = Worker()
    calls = coalescer(worker, window=10.0)
    waiting = await two_waiting_sent_as_one(worker, calls)
    worker.replies[1].set_result(refused("Unavailable"))
    assert await asyncio.gather(*waiting) == [refused("Unavailable")] * 2
    assert len(worker.sent) == 2


async def test_no_reply_for_a_batch_fails_each_of_its_calls_with_its_own_error() -> None:
    worker = Worker()
    calls = coalescer(worker, window=10.0)
    waiting = await two_waiting_sent_as_one(worker, calls)
    worker.replies[1].set_exception(PushRulesError.from_transport("connection-lost"))
    errors = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(e, PushRulesError) and e.reason == "connection-lost" for e in errors)
    assert errors[0] is not errors[1]


async def test_a_deep_event_goes_alone_in_the_single_form_even_while_one_is_out() -> None:
    worker = Worker()
    calls = coalescer(worker, window=10.0, max_json_depth=8)
    worker.call(calls.evaluate(entry("$a")))
    await turns()
    worker.call(calls.evaluate(entry("$deep", content=[[[["x"]]]])))
    await turns()
    assert worker.events_of(1) == ["$deep"]
    assert "events" not in worker.sent[1][0]


async def test_an_event_larger_than_max_bytes_goes_alone() -> None:
    worker = Worker()
    calls = coalescer(worker, window=10.0, max_bytes=1000)
    worker.call(calls.evaluate(entry("$a")))
    await turns()
    worker.call(calls.evaluate(entry("$small")))
    worker.call(calls.evaluate(entry("$large", content="x" * 2000)))
    await turns()
    assert [worker.events_of(m) for m in (1, 2)] == [["$small"], ["$large"]]
    assert "events" not in worker.sent[2][0]


async def test_closing_fails_the_waiting_calls_with_closed() -> None:
    worker = Worker()
    calls = coalescer(worker, window=10.0)
    worker.call(calls.evaluate(entry("$a")))
    await turns()
    waiting = worker.call(calls.evaluate(entry("$b")))
    await turns()
    calls.close()
    with pytest.raises(PushRulesError) as failure:
        await waiting
    assert failure.value.reason == "closed"
    assert len(worker.sent) == 1


async def test_an_event_that_is_not_json_fails_alone_and_sends_nothing() -> None:
    worker = Worker()
    calls = coalescer(worker, window=10.0)
    worker.call(calls.evaluate(entry("$a")))
    await turns()
    with pytest.raises(PushRulesError) as failure:
        await calls.evaluate(entry("$b", content=float("nan")))
    assert failure.value.kind == "BadJson"
    assert len(worker.sent) == 1


def test_depth_counts_brackets_outside_strings_only() -> None:
    assert not nests_deeper_than(b'{"a":[1]}', 2)
    assert nests_deeper_than(b'{"a":[{}]}', 2)
    assert not nests_deeper_than(b'{"a":"[[[[\\"[[["}', 1)


async def test_coalescing_switched_off_sends_each_call_alone() -> None:
    client = PushRulesClient("amqp://localhost:1", evaluate_coalescing=False)
    worker = Worker()

    async def request(body: Any, *, timeout: float | None = None, queue: str | None = None) -> Reply:
        return await worker.send(body, timeout or 0.0)

    client._rpc.request = request  # type: ignore[method-assign,assignment]
    room = cast(Any, {})
    calls = [
        worker.call(client.evaluate(cast(Any, {"event_id": f"$e{i}"}), room, [{"user_id": "@u:hs"}]))
        for i in range(3)
    ]
    await turns()
    assert [worker.events_of(m) for m in range(3)] == [["$e0"], ["$e1"], ["$e2"]]
    for message in range(3):
        worker.replies[message].set_result(ok({"notify": {}, "evaluated": 1}))
    assert await asyncio.gather(*calls) == [{"notify": {}, "evaluated": 1}] * 3


def test_depth_is_counted_past_the_quick_count_too() -> None:
    many = b'{"r":[' + b",".join(b'{"u":"[x"}' for _ in range(40)) + b"]}"
    assert not nests_deeper_than(many, 3)
    assert nests_deeper_than(many, 2)
    assert nests_deeper_than(b'{"a":"\\\\","b":[[[[]]]]}', 4)


async def test_an_unexpected_failure_of_the_send_reaches_every_call_of_its_message() -> None:
    worker = Worker()
    calls = coalescer(worker, window=10.0)
    waiting = await two_waiting_sent_as_one(worker, calls)
    worker.replies[1].set_exception(RuntimeError("a bug"))
    errors = await asyncio.gather(*waiting, return_exceptions=True)
    assert all(isinstance(e, RuntimeError) for e in errors)

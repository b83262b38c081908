"""`PushRulesClient`: one method per op of the RPC contract (docs/rpc-contract.md)."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from types import TracebackType
from typing import Any, Literal, cast, overload

from .errors import PushRulesError
from .evaluate import EvaluateItem, EvaluateManyEvent, batches, evaluate_answer, evaluate_item
from .evaluate_coalescer import EvaluateCoalescer, EvaluateCoalescing
from .rpc import RpcClient
from .wire_types import (
    ActionsBody,
    DeletedBody,
    EmptyBody,
    EnabledBody,
    EvaluateReply,
    EvaluationEvent,
    EvaluationRecipient,
    EvaluationRoom,
    NotifyNotification,
    NotifyRecipient,
    NotifyReply,
    PushAction,
    PushersBody,
    PusherSetAction,
    PushRule,
    PushRulesBody,
    Reply,
    RuleBody,
)

DEFAULT_QUEUE = "matrix.push.rpc"
DEFAULT_READ_QUEUE = "matrix.push.read"
DEFAULT_EVALUATE_QUEUE = "matrix.push.evaluate"
DEFAULT_DELIVER_QUEUE = "matrix.push.deliver"
DEFAULT_TIMEOUT = 10.0


class PushRulesClient:
    """A homeserver's client for the worker pool.

    Each method resolves with the Matrix response body of its endpoint and raises `PushRulesError`
    only. `user_id` is the user the homeserver authenticated: the workers act on that user's data
    and nothing else. Every call takes `timeout` (seconds, the client's `timeout` unless given),
    every write `message_id` (its idempotency key, a fresh UUID unless given: after an error with a
    `reason`, send the write again with the same one and it is applied at most once).

    One connection for every call, to one node of `url` at a time (a list, or comma-separated);
    it is opened by the first call and replaced on loss by one to the next node.
    """

    def __init__(
        self,
        url: str | Sequence[str],
        publisher_user_id: str | None = None,
        *,
        queue: str = DEFAULT_QUEUE,
        read_queue: str | None = DEFAULT_READ_QUEUE,
        evaluate_queue: str = DEFAULT_EVALUATE_QUEUE,
        deliver_queue: str = DEFAULT_DELIVER_QUEUE,
        timeout: float = DEFAULT_TIMEOUT,
        heartbeat_seconds: int = 10,
        connect_timeout: float = 5.0,
        logger: logging.Logger | None = None,
        evaluate_coalescing: EvaluateCoalescing | bool = True,
    ) -> None:
        """`evaluate_coalescing`: how `evaluate()` calls are gathered into messages of the batch form
        (docs/client.md, "Many events in one message"); `False` sends each call alone (workers that
        predate the batch form)."""
        self._evaluate_queue = evaluate_queue
        self._deliver_queue = deliver_queue
        self._rpc = RpcClient(
            url,
            queue=queue,
            read_queue=read_queue,
            publisher_user_id=publisher_user_id,
            timeout=timeout,
            heartbeat_seconds=heartbeat_seconds,
            connect_timeout=connect_timeout,
            logger=logger,
        )
        settings = EvaluateCoalescing() if evaluate_coalescing is True else evaluate_coalescing
        self._coalescer = (
            None if settings is False else EvaluateCoalescer(self._send_evaluate, timeout, settings)
        )

    async def __aenter__(self) -> PushRulesClient:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    @property
    def broker(self) -> str | None:
        """`host:port` of the node the client is connected to, if it is."""
        return self._rpc.broker

    async def close(self) -> None:
        """Fails pending calls (`reason="closed"`) and disconnects. Idempotent."""
        if self._coalescer is not None:
            self._coalescer.close()
        await self._rpc.close()

    # ---- push rules ----------------------------------------------------------

    async def get_push_rules(self, user_id: str, *, timeout: float | None = None) -> PushRulesBody:
        return cast(PushRulesBody, await self._read({"op": "get_pushrules", "user_id": user_id}, timeout))

    async def get_push_rule(
        self, user_id: str, scope: str, kind: str, rule_id: str, *, timeout: float | None = None
    ) -> PushRule:
        body = _address("get_pushrule", user_id, scope, kind, rule_id)
        return cast(PushRule, await self._read(body, timeout))

    async def set_push_rule(
        self,
        user_id: str,
        scope: str,
        kind: str,
        rule_id: str,
        rule: RuleBody,
        before: str | None = None,
        after: str | None = None,
        *,
        timeout: float | None = None,
        message_id: str | None = None,
    ) -> EmptyBody:
        body = {**_address("set_pushrule", user_id, scope, kind, rule_id), "rule": rule}
        if before is not None:
            body["before"] = before
        if after is not None:
            body["after"] = after
        return cast(EmptyBody, await self._write(body, timeout, message_id))

    async def delete_push_rule(
        self,
        user_id: str,
        scope: str,
        kind: str,
        rule_id: str,
        *,
        timeout: float | None = None,
        message_id: str | None = None,
    ) -> EmptyBody:
        body = _address("delete_pushrule", user_id, scope, kind, rule_id)
        return cast(EmptyBody, await self._write(body, timeout, message_id))

    async def get_push_rule_actions(
        self, user_id: str, scope: str, kind: str, rule_id: str, *, timeout: float | None = None
    ) -> ActionsBody:
        body = _address("get_pushrule_actions", user_id, scope, kind, rule_id)
        return cast(ActionsBody, await self._read(body, timeout))

    async def set_push_rule_actions(
        self,
        user_id: str,
        scope: str,
        kind: str,
        rule_id: str,
        actions: Sequence[PushAction],
        *,
        timeout: float | None = None,
        message_id: str | None = None,
    ) -> EmptyBody:
        body = {**_address("set_pushrule_actions", user_id, scope, kind, rule_id), "actions": list(actions)}
        return cast(EmptyBody, await self._write(body, timeout, message_id))

    async def get_push_rule_enabled(
        self, user_id: str, scope: str, kind: str, rule_id: str, *, timeout: float | None = None
    ) -> EnabledBody:
        body = _address("get_pushrule_enabled", user_id, scope, kind, rule_id)
        return cast(EnabledBody, await self._read(body, timeout))

    async def set_push_rule_enabled(
        self,
        user_id: str,
        scope: str,
        kind: str,
        rule_id: str,
        enabled: bool,
        *,
        timeout: float | None = None,
        message_id: str | None = None,
    ) -> EmptyBody:
        body = {**_address("set_pushrule_enabled", user_id, scope, kind, rule_id), "enabled": enabled}
        return cast(EmptyBody, await self._write(body, timeout, message_id))

    # ---- pushers ---------------------------------------------------------------

    async def get_pushers(self, user_id: str, *, timeout: float | None = None) -> PushersBody:
        return cast(PushersBody, await self._read({"op": "get_pushers", "user_id": user_id}, timeout))

    async def set_pusher(
        self,
        user_id: str,
        action: PusherSetAction,
        device_id: str | None = None,
        *,
        timeout: float | None = None,
        message_id: str | None = None,
    ) -> EmptyBody:
        """`action` is the client's `POST /pushers/set` body as it came; `device_id` the device of the
        request's access token (what whoami answers), never a value from the client's body."""
        body: dict[str, Any] = {"op": "set_pusher", "user_id": user_id}
        if device_id is not None:
            body["device_id"] = device_id
        body["action"] = action
        return cast(EmptyBody, await self._write(body, timeout, message_id))

    async def delete_pushers(
        self,
        user_id: str,
        device_ids: Sequence[str] | None = None,
        except_device_id: str | None = None,
        all: bool = False,
        include_email: bool = False,
        *,
        timeout: float | None = None,
        message_id: str | None = None,
    ) -> DeletedBody:
        """A homeserver op (trusted publishers only): the pushers of `device_ids` (logout, device
        deletion), of every device but `except_device_id` (password change), or `all`; give exactly
        one (the workers answer `BadJson` otherwise). E-mail pushers go only with `include_email`."""
        body: dict[str, Any] = {"op": "delete_pushers", "user_id": user_id}
        if device_ids is not None:
            body["device_ids"] = list(device_ids)
        if except_device_id is not None:
            body["except_device_id"] = except_device_id
        if all:
            body["all"] = True
        if include_email:
            body["include_email"] = True
        return cast(DeletedBody, await self._write(body, timeout, message_id))

    async def delete_user_data(
        self, user_id: str, *, timeout: float | None = None, message_id: str | None = None
    ) -> EmptyBody:
        """A homeserver op (trusted publishers only), on deactivation: the user's push rules and every
        pusher, e-mail ones included, go; the user then reads as a new one."""
        body = {"op": "delete_user_data", "user_id": user_id}
        return cast(EmptyBody, await self._write(body, timeout, message_id))

    # ---- evaluate and notify ---------------------------------------------------

    async def evaluate(
        self,
        event: EvaluationEvent,
        room: EvaluationRoom,
        recipients: Sequence[EvaluationRecipient],
        explain: bool = False,
        *,
        timeout: float | None = None,
    ) -> EvaluateReply:
        """Which of `recipients` an event notifies, with which actions: `{"notify": {user_id:
        actions}, "evaluated": n}` (`rule_ids` too with `explain`). On the evaluate queue; calls made
        while another is out share a message (see `evaluate_coalescing`)."""
        item = evaluate_item(event, room, recipients, explain)
        if self._coalescer is None:
            reply = await self._send_evaluate({"op": "evaluate", **item.entry}, timeout)
        else:
            reply = await self._coalescer.evaluate(item.entry, timeout)
        return evaluate_answer(reply, item.order)

    async def _send_evaluate(self, body: Any, timeout: float | None) -> Reply:
        return await self._rpc.request(body, timeout=timeout, queue=self._evaluate_queue)

    async def evaluate_many(
        self, events: Sequence[EvaluateManyEvent], *, timeout: float | None = None
    ) -> list[EvaluateReply | PushRulesError]:
        """Several events in messages of the batch form (64 events or 1 MiB each), sent at once;
        one answer per event, in order: what `evaluate()` returns, or that event's own
        `PushRulesError` (a bad event, or no reply for its message). Never raises as a whole."""
        items = [
            evaluate_item(each["event"], each["room"], each["recipients"], each.get("explain", False))
            for each in events
        ]
        answers: list[EvaluateReply | PushRulesError] = [
            PushRulesError.unserializable("this event is not JSON") for _ in items
        ]
        messages = batches(items)
        results = await asyncio.gather(
            *(self._evaluate_batch([items[i] for i in message], timeout) for message in messages)
        )
        for message, result in zip(messages, results, strict=True):
            for index, answer in zip(message, result, strict=True):
                answers[index] = answer
        return answers

    async def _evaluate_batch(
        self, items: list[EvaluateItem], timeout: float | None
    ) -> list[EvaluateReply | PushRulesError]:
        try:
            reply = await self._rpc.request(
                {"op": "evaluate", "events": [item.entry for item in items]},
                timeout=timeout,
                queue=self._evaluate_queue,
            )
            if not reply["ok"]:
                raise PushRulesError(reply["error"])
            results = cast(list[Reply], reply["body"]["results"])
        except PushRulesError as error:
            return [error for _ in items]
        answers: list[EvaluateReply | PushRulesError] = []
        for item, result in zip(items, results, strict=False):
            try:
                answers.append(evaluate_answer(result, item.order))
            except PushRulesError as error:
                answers.append(error)
        return answers

    @overload
    async def notify(
        self,
        notification: NotifyNotification,
        recipients: Sequence[NotifyRecipient],
        reply: Literal[False] = False,
        message_id: str | None = None,
        *,
        timeout: float | None = None,
    ) -> None: ...

    @overload
    async def notify(
        self,
        notification: NotifyNotification,
        recipients: Sequence[NotifyRecipient],
        reply: Literal[True],
        message_id: str | None = None,
        *,
        timeout: float | None = None,
    ) -> NotifyReply: ...

    async def notify(
        self,
        notification: NotifyNotification,
        recipients: Sequence[NotifyRecipient],
        reply: bool = False,
        message_id: str | None = None,
        *,
        timeout: float | None = None,
    ) -> NotifyReply | None:
        """Hands one event's notification to the workers for delivery (docs/delivery.md), on the
        delivery queue, persistent. Returns `None` once the broker confirmed the message (from then
        on nothing is lost); with `reply=True`, once a worker has secured the deliveries, with
        `{"recipients", "devices"}` (and `"pending"` for parts not taken in yet). A homeserver op.

        `message_id` names one distinct message (a fresh UUID unless given): the same one again
        schedules nothing twice. When one event's recipients are split over several messages, give
        each its own (the event ID and the batch's index, say)."""
        body = {"op": "notify", "notification": notification, "recipients": list(recipients)}
        key = message_id or str(uuid.uuid4())
        if reply:
            answer = await self._rpc.request(
                body, timeout=timeout, message_id=key, queue=self._deliver_queue, persistent=True
            )
            return cast(NotifyReply, _body(answer))
        await self._rpc.publish(body, timeout=timeout, message_id=key, queue=self._deliver_queue)
        return None

    # ---- the calls -------------------------------------------------------------

    async def _read(self, body: dict[str, Any], timeout: float | None) -> Any:
        return _body(await self._rpc.request(body, timeout=timeout, read=True))

    async def _write(self, body: dict[str, Any], timeout: float | None, message_id: str | None) -> Any:
        key = message_id or str(uuid.uuid4())
        return _body(await self._rpc.request(body, timeout=timeout, message_id=key))


def _address(op: str, user_id: str, scope: str, kind: str, rule_id: str) -> dict[str, Any]:
    return {"op": op, "user_id": user_id, "scope": scope, "kind": kind, "rule_id": rule_id}


def _body(reply: Reply) -> Any:
    if not reply["ok"]:
        raise PushRulesError(reply["error"])
    return reply["body"]

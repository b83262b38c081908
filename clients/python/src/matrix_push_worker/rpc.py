"""The caller's side of the RPC contract, on one connection shared by every call.

As the TypeScript client's `RpcClient` does it: one channel with publisher
confirms for publishing, consuming direct reply-to (`amq.rabbitmq.reply-to`)
on it; `mandatory` publishes, so that a request no queue takes fails at
once; a per-call deadline that is also the request's `expiration`. When the
connection goes, every pending call fails at once with `connection-lost`
(direct reply-to belongs to the connection: their replies could never
arrive) and the next call connects again, to the next node of `url`.

Nothing is declared: the workers declare their queues.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import sys
import time
import uuid
from collections.abc import Coroutine, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, TypeVar, cast

import aiormq
from aio_pika.abc import AbstractChannel
from aio_pika.exceptions import DeliveryError, PublishError
from aiormq.abc import DeliveredMessage

from .broker import Backoff, BrokerConnection, BrokerLink, BrokerUnavailableError
from .errors import PushRulesError, TransportFailure
from .wire_types import Reply

REPLY_QUEUE = "amq.rabbitmq.reply-to"


class _Transport(Exception):
    def __init__(self, reason: TransportFailure) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class _Session:
    link: BrokerLink
    channel: AbstractChannel
    underlay: aiormq.abc.AbstractChannel
    """The aio-pika channel's own aiormq channel: requests are published and replies consumed on it
    directly, without aio-pika's `Message` and `IncomingMessage` objects and the task aio-pika
    starts per delivery (CPU each call paid for nothing: see bench/README.md, issue 41)."""
    unwaited: bool = False
    """`underlay.basic_publish` takes `wait` (aiormq's `Channel` does, not its abstract type)."""
    pending: dict[str, asyncio.Future[Reply]] = field(default_factory=dict)
    read_queue_served: bool = False
    retired: bool = False
    probe_task: asyncio.Task[None] | None = None


class RpcClient:
    def __init__(
        self,
        url: str | Sequence[str],
        *,
        queue: str,
        read_queue: str | None,
        publisher_user_id: str | None,
        timeout: float,
        heartbeat_seconds: int = 10,
        connect_timeout: float = 5.0,
        read_probe_interval: float = 1.0,
        logger: logging.Logger | None = None,
    ) -> None:
        self._queue = queue
        self._read_queue = read_queue
        self._publisher = publisher_user_id
        self.timeout = timeout
        self._probe_interval = read_probe_interval
        self._closed = False
        self._broker: BrokerConnection[_Session] = BrokerConnection(
            url,
            setup=self._open,
            retire=self._retire,
            heartbeat_seconds=heartbeat_seconds,
            connect_timeout=connect_timeout,
            backoff=Backoff(),
            logger=logger or logging.getLogger("matrix_push_worker"),
        )

    @property
    def broker(self) -> str | None:
        """`host:port` of the node the client is connected to, if it is."""
        address = self._broker.address
        return None if address is None else address.label

    async def request(
        self,
        body: Any,
        *,
        timeout: float | None = None,
        message_id: str | None = None,
        queue: str | None = None,
        read: bool = False,
        persistent: bool = False,
    ) -> Reply:
        """The reply envelope. Raises `PushRulesError` (a transport failure, or a body that is not JSON).

        `body`: an object, or `bytes` already encoded as JSON (the evaluate coalescer's batches).

        `persistent`: no `expiration`, the message must be served even after the caller stopped
        waiting (`notify`); the call's deadline still bounds the wait for its reply.
        """
        content = body if isinstance(body, bytes) else _serialize(body)
        seconds = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + seconds
        try:
            return await _within(
                self._request(content, deadline, message_id, queue, read, persistent), seconds
            )
        except asyncio.TimeoutError:
            raise PushRulesError.from_transport("timeout") from None
        except _Transport as failure:
            raise PushRulesError.from_transport(failure.reason) from None

    async def publish(self, body: Any, *, timeout: float | None = None, message_id: str, queue: str) -> None:
        """A persistent message that wants no reply, settled by the broker's confirm."""
        content = _serialize(body)
        seconds = self.timeout if timeout is None else timeout
        try:
            await _within(self._publish_only(content, message_id, queue), seconds)
        except asyncio.TimeoutError:
            raise PushRulesError.from_transport("timeout") from None
        except _Transport as failure:
            raise PushRulesError.from_transport(failure.reason) from None

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        await self._broker.close(lambda session: self._fail_all(session, "closed"))

    # ---- calls ---------------------------------------------------------------

    async def _connected(self) -> _Session:
        if self._closed:
            raise _Transport("closed")
        try:
            return await self._broker.session()
        except BrokerUnavailableError:
            raise _Transport("closed" if self._closed else "connection-lost") from None

    async def _request(
        self,
        content: bytes,
        deadline: float,
        message_id: str | None,
        queue: str | None,
        read: bool,
        persistent: bool,
    ) -> Reply:
        session = await self._connected()
        correlation_id = str(uuid.uuid4())
        reply: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        session.pending[correlation_id] = reply
        try:
            left_ms = max(1, int((deadline - time.monotonic()) * 1000))
            target = queue or self._queue
            to_read_queue = (
                read and queue is None and self._read_queue is not None and session.read_queue_served
            )
            if to_read_queue:
                target = cast(str, self._read_queue)
            message = _message(
                content,
                correlation_id=correlation_id,
                reply_to=REPLY_QUEUE,
                message_id=message_id,
                user_id=self._publisher,
                expiration_ms=None if persistent else left_ms,
            )
            try:
                await self._send(session, message, target)
            except PublishError:
                # Returned: no queue took it. A read the read queue returned goes to the request
                # queue, which serves every op.
                if not to_read_queue:
                    raise _Transport("unroutable") from None
                session.read_queue_served = False
                try:
                    await self._send(session, message, self._queue)
                except PublishError:
                    raise _Transport("unroutable") from None
            return await reply
        finally:
            session.pending.pop(correlation_id, None)

    async def _publish_only(self, content: bytes, message_id: str, queue: str) -> None:
        session = await self._connected()
        message = _message(
            content,
            correlation_id=str(uuid.uuid4()),
            reply_to=None,
            message_id=message_id,
            user_id=self._publisher,
            expiration_ms=None,
        )
        try:
            await self._send(session, message, queue)
        except PublishError:
            raise _Transport("unroutable") from None

    async def _send(self, session: _Session, message: _Message, queue: str) -> None:
        """Publishes and waits for the broker's confirm. `PublishError`: returned (no queue)."""
        if session.retired:
            raise _Transport("connection-lost")
        try:
            # `wait=False`: the channel's lock is released once the frames are queued for its writer,
            # not after they are written, so that concurrent calls do not publish one event-loop turn
            # apart; the broker's confirm is still awaited, and the writer keeps their order.
            if session.unwaited:
                await cast(aiormq.Channel, session.underlay).basic_publish(
                    message.body,
                    exchange="",
                    routing_key=queue,
                    properties=message.properties,
                    mandatory=True,
                    wait=False,
                )
            else:
                await session.underlay.basic_publish(
                    message.body,
                    exchange="",
                    routing_key=queue,
                    properties=message.properties,
                    mandatory=True,
                )
        except PublishError:
            raise
        except DeliveryError:
            # Nacked: in no queue. The channel goes with its connection: a channel that published
            # to a quorum queue during a leader election may keep being refused (see the TypeScript
            # client); a new one is served as soon as the new leader is up.
            session.link.lose("the broker refused a request")
            raise _Transport("refused") from None
        except asyncio.CancelledError:
            raise
        except Exception as error:
            session.link.lose(f"publishing failed: {error}")
            raise _Transport("connection-lost") from None

    # ---- the session ---------------------------------------------------------

    async def _open(self, link: BrokerLink) -> _Session:
        channel = await link.connection.channel(publisher_confirms=True, on_return_raises=True)
        underlay = await channel.get_underlay_channel()
        unwaited = (
            isinstance(underlay, aiormq.Channel)
            and "wait" in inspect.signature(underlay.basic_publish).parameters
        )
        session = _Session(link, channel, underlay, unwaited)
        channel.close_callbacks.add(lambda _sender, error: link.lose(f"the channel closed: {error}"))

        async def on_reply(message: DeliveredMessage) -> None:
            # A second reply for the same call (a redelivered request answered again) finds
            # nothing pending and is dropped.
            waiter = session.pending.pop(str(message.header.properties.correlation_id), None)
            if waiter is None or waiter.done():
                return
            reply = _parse_reply(message.body)
            if reply is None:
                waiter.set_exception(_Transport("bad-reply"))
            else:
                waiter.set_result(reply)

        # Direct reply-to: consumed with no-ack on the publishing channel before anything is sent.
        await session.underlay.basic_consume(REPLY_QUEUE, on_reply, no_ack=True)
        if self._read_queue is not None:
            probe = await self._count_read_consumers(session, self._read_queue, None)
            session.probe_task = asyncio.create_task(self._watch_read_queue(session, self._read_queue, probe))
        return session

    async def _watch_read_queue(
        self, session: _Session, read_queue: str, probe: AbstractChannel | None
    ) -> None:
        """Counts the read queue's consumers every `read_probe_interval`: reads go there only while
        some worker consumes it, so that a read never waits in a queue nobody reads."""
        try:
            while not session.retired:
                await asyncio.sleep(self._probe_interval)
                probe = await self._count_read_consumers(session, read_queue, probe)
        finally:
            if probe is not None and not probe.is_closed:
                with contextlib.suppress(Exception):
                    await probe.close()

    async def _count_read_consumers(
        self, session: _Session, read_queue: str, probe: AbstractChannel | None
    ) -> AbstractChannel | None:
        # Its own channel: a queue that does not exist closes the channel that asks.
        try:
            if probe is None or probe.is_closed:
                probe = await session.link.connection.channel(publisher_confirms=False)
            declared = await probe.declare_queue(read_queue, passive=True)
            result = declared.declaration_result
            session.read_queue_served = result.consumer_count is not None and result.consumer_count > 0
        except asyncio.CancelledError:
            raise
        except Exception:
            session.read_queue_served = False
        return probe

    def _retire(self, session: _Session) -> None:
        session.retired = True
        if session.probe_task is not None:
            session.probe_task.cancel()
        self._fail_all(session, "connection-lost")

    def _fail_all(self, session: _Session, reason: TransportFailure) -> None:
        session.retired = True
        if session.probe_task is not None:
            session.probe_task.cancel()
        pending, session.pending = session.pending, {}
        for waiter in pending.values():
            if not waiter.done():
                waiter.set_exception(_Transport(reason))


T = TypeVar("T")


async def _within(call: Coroutine[Any, Any, T], seconds: float) -> T:
    """`call`, or `asyncio.TimeoutError` after `seconds`; on 3.11 and later in the caller's task
    (`wait_for` runs it in a task of its own)."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(seconds):
            return await call
    return await asyncio.wait_for(call, seconds)


@dataclass(frozen=True)
class _Message:
    body: bytes
    properties: aiormq.spec.Basic.Properties


def _message(
    content: bytes,
    *,
    correlation_id: str,
    reply_to: str | None,
    message_id: str | None,
    user_id: str | None,
    expiration_ms: int | None,
) -> _Message:
    # AMQP's `timestamp` is in whole seconds. The workers' deadline is `timestamp` + `expiration`:
    # the milliseconds the timestamp drops are added to the expiration, so that the deadline is the
    # caller's to the millisecond (the broker's own expiry of a queued request is at most 1 s later).
    now_ms = time.time_ns() // 1_000_000
    seconds = now_ms // 1000
    expiration = None if expiration_ms is None else expiration_ms + now_ms - seconds * 1000
    properties = aiormq.spec.Basic.Properties(
        content_type="application/json",
        correlation_id=correlation_id,
        reply_to=reply_to,
        message_id=message_id,
        user_id=user_id,
        timestamp=datetime.fromtimestamp(seconds, tz=timezone.utc),
        expiration=None if expiration is None else str(expiration),
        # 2: persistent, served however late (`notify`); 1: not.
        delivery_mode=2 if expiration is None else 1,
        # As aio-pika's `Message` sent them: the same bytes on the wire.
        headers={},
        priority=0,
    )
    return _Message(content, properties)


def _serialize(body: Any) -> bytes:
    try:
        return json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError, RecursionError) as error:
        raise PushRulesError.unserializable(str(error)) from None


def _parse_reply(content: bytes) -> Reply | None:
    """The envelope, trusted to be the contract's once it is a JSON object with `ok`."""
    try:
        value = json.loads(content)
    except ValueError:
        return None
    return cast(Reply, value) if isinstance(value, dict) and "ok" in value else None

"""One connection to one node of the broker, replaced on loss.

The same behaviour as the TypeScript client's `BrokerConnection`: the nodes
of `url` are shuffled once per process; when the connection is lost, the
next node is tried at once, round-robin; only after a whole round failed
does it wait (capped, jittered backoff) before the next round. While it
waits, callers are refused at once (a caller with a deadline is not held
for a broker that is not there); while a round is under way they wait for
it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import random
import socket
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar
from urllib.parse import urlsplit

import aio_pika
from aio_pika.abc import AbstractConnection

S = TypeVar("S")
_State = Literal["idle", "connecting", "waiting", "connected", "closed"]

_DEFAULT_PORTS = {"amqp": 5672, "amqps": 5671}


@dataclass(frozen=True)
class BrokerAddress:
    url: str
    """With its credentials: never log it."""
    label: str
    """`host:port`, safe to log."""


def parse_broker_urls(urls: str | Sequence[str]) -> list[BrokerAddress]:
    """The nodes of `url`: one URL, several comma-separated, or a list. Raises `ValueError`.

    Errors name an entry by its position and never echo it (it may carry a password).
    """
    entries = [entry.strip() for entry in (urls.split(",") if isinstance(urls, str) else list(urls))]
    if not entries or all(entry == "" for entry in entries):
        raise ValueError("no broker URL is given")
    addresses: list[BrokerAddress] = []
    for index, entry in enumerate(entries):
        position = f"broker URL #{index + 1}"
        if entry == "":
            raise ValueError(f"{position} is empty")
        if any(c in entry for c in ", \t\n"):
            raise ValueError(f"{position} contains a comma or a space: give each node as a URL of its own")
        parts = urlsplit(entry)
        default_port = _DEFAULT_PORTS.get(parts.scheme.lower())
        if default_port is None or not entry.lower().startswith(f"{parts.scheme.lower()}://"):
            raise ValueError(f"{position} must start with amqp:// or amqps://")
        try:
            port = parts.port or default_port
        except ValueError:
            raise ValueError(f"{position} has an invalid port") from None
        if not parts.hostname:
            raise ValueError(f"{position} names no host")
        label = f"{parts.hostname}:{port}"
        if any(address.label == label for address in addresses):
            raise ValueError(f"broker {label} is listed twice")
        addresses.append(BrokerAddress(entry, label))
    return addresses


class BrokerUnavailableError(Exception):
    """No session: the last failed round's error, or the connection was closed."""


@dataclass
class BrokerLink:
    """One open connection, as the owner's `setup` sees it."""

    connection: AbstractConnection
    address: BrokerAddress
    lost: bool = False
    _on_lost: Callable[[BrokerLink, str], None] = field(default=lambda link, reason: None, repr=False)

    def lose(self, reason: str) -> None:
        """This connection can no longer serve its owner: drop it and connect again."""
        if self.lost:
            return
        self.lost = True
        self._on_lost(self, reason)


@dataclass(frozen=True)
class Backoff:
    base: float = 0.1
    maximum: float = 1.0

    def delay(self, round_: int, rand: Callable[[], float]) -> float:
        """Full jitter under a cap doubling per failed round, never under `base`."""
        cap = min(self.maximum, self.base * 2.0 ** max(0, round_ - 1))
        return max(self.base, cap * rand())


class BrokerConnection(Generic[S]):
    def __init__(
        self,
        urls: str | Sequence[str],
        *,
        setup: Callable[[BrokerLink], Awaitable[S]],
        retire: Callable[[S], None],
        heartbeat_seconds: int,
        connect_timeout: float,
        backoff: Backoff,
        logger: logging.Logger,
        role: str = "matrix-push-worker python client",
    ) -> None:
        self._order = parse_broker_urls(urls)
        random.shuffle(self._order)
        self._next = 0
        self._failures = 0
        self._setup = setup
        self._retire = retire
        self._heartbeat = heartbeat_seconds
        self._connect_timeout = connect_timeout
        self._backoff = backoff
        self._log = logger
        self._name = f"{role} {socket.gethostname()}:{os.getpid()}"
        self._state: _State = "idle"
        self._live: tuple[BrokerLink, S] | None = None
        self._ever_connected = False
        self._last_error: BaseException | None = None
        self._waiters: list[asyncio.Future[S]] = []
        self._loop_task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()

    @property
    def address(self) -> BrokerAddress | None:
        return None if self._live is None else self._live[0].address

    async def session(self) -> S:
        """The live session; or the one the round under way opens. Raises `BrokerUnavailableError`."""
        if self._state == "connected" and self._live is not None:
            return self._live[1]
        if self._is_closed():
            raise BrokerUnavailableError("the broker connection is closed")
        if self._state == "waiting":
            raise BrokerUnavailableError(f"cannot reach the broker: {self._last_error}")
        if self._state == "idle":
            self._reconnect()
        waiter: asyncio.Future[S] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        return await waiter

    async def close(self, before_disconnect: Callable[[S], None]) -> None:
        if self._is_closed():
            return
        self._state = "closed"
        self._stop.set()
        self._fail_waiters(BrokerUnavailableError("the broker connection is closed"))
        live, self._live = self._live, None
        if live is not None:
            link, session = live
            link.lost = True
            before_disconnect(session)
            await _close_within(link.connection, self._connect_timeout)
        if self._loop_task is not None and not self._loop_task.done():
            self._loop_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._loop_task

    def _is_closed(self) -> bool:
        # A call, not a comparison mypy narrows: `close()` changes the state across an await.
        return self._state == "closed"

    def _reconnect(self) -> None:
        if self._state in ("connecting", "waiting", "closed"):
            return
        self._state = "connecting"
        self._loop_task = asyncio.create_task(self._attempts())

    async def _attempts(self) -> None:
        rounds = 0
        while self._state != "closed":
            address = self._order[self._next % len(self._order)]
            self._next += 1
            try:
                link, session = await self._attempt(address)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                if self._is_closed():
                    return
                self._last_error = error
                self._failures += 1
                if self._failures % len(self._order) != 0:
                    self._log.warning(
                        "cannot reach RabbitMQ node %s (%s); trying the next one", address.label, error
                    )
                    continue
                rounds += 1
                delay = self._backoff.delay(rounds, random.random)
                self._log.warning(
                    "cannot reach RabbitMQ (%s, round %d); retrying in %.0f ms", error, rounds, delay * 1000
                )
                self._state = "waiting"
                self._fail_waiters(BrokerUnavailableError(f"cannot reach the broker: {error}"))
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), delay)
                if self._is_closed():
                    return
                self._state = "connecting"
                continue
            if self._is_closed():
                await _close_within(link.connection, self._connect_timeout)
                return
            self._failures = 0
            again = self._ever_connected
            self._ever_connected = True
            self._live = (link, session)
            self._state = "connected"
            self._log.info("%s RabbitMQ at %s", "reconnected to" if again else "connected to", address.label)
            waiters, self._waiters = self._waiters, []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(session)
            return

    async def _attempt(self, address: BrokerAddress) -> tuple[BrokerLink, S]:
        connection = await asyncio.wait_for(
            aio_pika.connect(
                address.url,
                timeout=self._connect_timeout,
                client_properties={"connection_name": self._name},
                heartbeat=self._heartbeat,
            ),
            self._connect_timeout,
        )
        link = BrokerLink(connection, address, _on_lost=self._lost)
        connection.close_callbacks.add(lambda _sender, error: link.lose(f"the connection closed: {error}"))
        try:
            session = await asyncio.wait_for(self._setup(link), self._connect_timeout)
            if link.lost:
                raise BrokerUnavailableError("the connection was lost while it was being set up")
        except BaseException:
            link.lost = True
            await _close_within(connection, self._connect_timeout)
            raise
        return link, session

    def _lost(self, link: BrokerLink, reason: str) -> None:
        live = self._live
        if live is None or live[0] is not link:
            return
        self._live = None
        self._log.warning("lost RabbitMQ at %s: %s", link.address.label, reason)
        self._retire(live[1])
        asyncio.get_running_loop().create_task(_close_within(link.connection, self._connect_timeout))
        if self._state == "connected":
            self._state = "idle"
            self._reconnect()

    def _fail_waiters(self, error: BaseException) -> None:
        waiters, self._waiters = self._waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_exception(error)


async def _close_within(connection: AbstractConnection, seconds: float) -> None:
    """Closes without waiting for a silent node's answer longer than `seconds`."""
    with contextlib.suppress(asyncio.TimeoutError, Exception):
        await asyncio.wait_for(connection.close(), seconds)

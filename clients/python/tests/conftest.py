"""Real workers for the tests: the project's built worker (`node dist/main.js`) on its own queues
and database, against the broker and MongoDB of `AMQP_URL` / `MONGODB_URL` (the local services of
`scripts/services.sh up` by default; scripts/python-client.sh starts them when nothing answers)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import aio_pika
import pytest
import pytest_asyncio
from pymongo import MongoClient

from matrix_push_worker import PushRulesClient

from .push_gateway import PushGateway, running_gateway

ROOT = Path(__file__).resolve().parents[3]
AMQP_URL = os.environ.get("AMQP_URL", "amqp://guest:guest@127.0.0.1:5672")
MONGODB_URL = os.environ.get("MONGODB_URL", "mongodb://127.0.0.1:27017")
PARTITIONS = 4
# The broker user of AMQP_URL: RabbitMQ refuses any other `user_id`, and the worker trusts it.
PUBLISHER = unquote(urlsplit(AMQP_URL).username or "guest")


def node_executable() -> str:
    """The Node the project runs on: `MPW_NODE` (the suite passes its own), else the one npm installs
    in node_modules (the system's may be older than the project needs), else `node` from PATH."""
    given = os.environ.get("MPW_NODE")
    if given:
        return given
    local = ROOT / "node_modules" / ".bin" / "node"
    return str(local) if local.exists() else "node"


@dataclass(frozen=True)
class Names:
    """A run's own queues, exchanges and database, so that it collides with nothing."""

    prefix: str = field(default_factory=lambda: f"pyclient.{uuid.uuid4().hex[:10]}")

    @property
    def queue(self) -> str:
        return self.prefix

    @property
    def read_queue(self) -> str:
        return f"{self.prefix}.read"

    @property
    def evaluate_queue(self) -> str:
        return f"{self.prefix}.evaluate"

    @property
    def deliver_queue(self) -> str:
        return f"{self.prefix}.deliver"

    @property
    def database(self) -> str:
        return self.prefix.replace(".", "_")

    def environment(self) -> dict[str, str]:
        return {
            **os.environ,
            "AMQP_URL": AMQP_URL,
            "MONGODB_URL": MONGODB_URL,
            "MONGODB_DATABASE": self.database,
            "RPC_QUEUE": self.queue,
            "RPC_READ_QUEUE": self.read_queue,
            "EVALUATE_QUEUE": self.evaluate_queue,
            "DELIVERY_QUEUE": self.deliver_queue,
            "DELIVERY_PARTITIONS": str(PARTITIONS),
            "RPC_DEAD_LETTER_EXCHANGE": f"{self.prefix}.dlx",
            "RPC_DEAD_LETTER_QUEUE": f"{self.prefix}.dead",
            "EVENTS_EXCHANGE": f"{self.prefix}.events",
            "TRUSTED_PUBLISHERS": PUBLISHER,
            # The tests' push gateway listens on 127.0.0.1, over plain HTTP.
            "PUSH_GATEWAY_IP_ALLOWLIST": "127.0.0.1/32",
            "ALLOW_INSECURE_PUSH_GATEWAYS": "true",
            "HEALTH_HOST": "127.0.0.1",
            "HEALTH_PORT": "0",
            "LOG_LEVEL": "info",
        }

    def queues(self) -> list[str]:
        partitions = [f"{self.deliver_queue}.p{index:03d}" for index in range(PARTITIONS)]
        return [
            self.queue,
            self.read_queue,
            self.evaluate_queue,
            self.deliver_queue,
            *partitions,
            f"{self.prefix}.dead",
        ]


class Worker:
    """One `node dist/main.js` process; `start()` returns once it logs `worker started`."""

    def __init__(self, names: Names) -> None:
        self.names = names
        self.process: subprocess.Popen[str] | None = None
        self.lines: list[str] = []

    def start(self, timeout: float = 90.0) -> None:
        entry = ROOT / "dist" / "main.js"
        if not entry.exists():
            raise RuntimeError(f"{entry} is missing: run `npm run build` first")
        process = subprocess.Popen(
            [node_executable(), str(entry)],
            cwd=ROOT,
            env=self.names.environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.process = process
        assert process.stdout is not None
        # A reader thread keeps the pipe drained for the whole run (a full pipe would stall the worker).
        started = _LineWatcher(process, self.lines, "worker started")
        if not started.wait(timeout):
            self.stop()
            raise RuntimeError("the worker did not start:\n" + "\n".join(self.lines[-40:]))

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


class _LineWatcher:
    def __init__(self, process: subprocess.Popen[str], lines: list[str], ready: str) -> None:
        import threading

        self._ready = threading.Event()

        def read() -> None:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(line.rstrip())
                with contextlib.suppress(ValueError):
                    if json.loads(line).get("msg") == ready:
                        self._ready.set()

        threading.Thread(target=read, daemon=True).start()

    def wait(self, timeout: float) -> bool:
        return self._ready.wait(timeout)


@pytest.fixture(scope="session")
def names() -> Names:
    return Names()


@pytest.fixture(scope="session")
def worker(names: Names) -> Iterator[Worker]:
    worker = Worker(names)
    worker.start()
    try:
        yield worker
    finally:
        worker.stop()
        asyncio.run(_delete_topology(names))
        mongo: MongoClient[dict[str, Any]]
    with MongoClient(MONGODB_URL, serverSelectionTimeoutMS=10_000) as mongo:
        mongo.drop_database(names.database)


async def _delete_topology(names: Names) -> None:
    """The queues and exchanges the worker declared (a broker left with many quorum queues runs out
    of file descriptors)."""
    connection = await aio_pika.connect(AMQP_URL)
    async with connection:
        for name in names.queues():
            channel = await connection.channel()
            with contextlib.suppress(Exception):
                await channel.queue_delete(name)
            with contextlib.suppress(Exception):
                await channel.close()
        for exchange in (f"{names.prefix}.dlx", f"{names.prefix}.events"):
            channel = await connection.channel()
            with contextlib.suppress(Exception):
                await channel.exchange_delete(exchange)
            with contextlib.suppress(Exception):
                await channel.close()


def client_for(names: Names, **overrides: Any) -> PushRulesClient:
    options: dict[str, Any] = {
        "queue": names.queue,
        "read_queue": names.read_queue,
        "evaluate_queue": names.evaluate_queue,
        "deliver_queue": names.deliver_queue,
        "timeout": 15.0,
        **overrides,
    }
    url = options.pop("url", AMQP_URL)
    return PushRulesClient(url=url, publisher_user_id=PUBLISHER, **options)


@pytest_asyncio.fixture(scope="session")
async def client(worker: Worker) -> AsyncIterator[PushRulesClient]:
    async with client_for(worker.names) as client:
        yield client


def new_user(name: str) -> str:
    """A user of this test alone (the database is shared by the run)."""
    return f"@{name}-{uuid.uuid4().hex[:8]}:example.org"


async def known_user(client: PushRulesClient, name: str) -> str:
    """A new user who has push rules, as one has after a first `GET /pushrules/` (a rule write for a
    user with none is `M_NOT_FOUND`, as in Synapse)."""
    user = new_user(name)
    await client.get_push_rules(user)
    return user


@pytest_asyncio.fixture
async def gateway() -> AsyncIterator[PushGateway]:
    """A push gateway on 127.0.0.1 of the test's own."""
    async with running_gateway() as gateway:
        yield gateway

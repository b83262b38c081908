"""Across a broker restart: calls waiting for a reply fail at once as `connection-lost` (their
reply-to belonged to the lost connection), and the same client serves later calls on a new one.

It stops the local RabbitMQ (`scripts/services.sh stop-rabbitmq`) and starts it again whatever
happens: run it only where nothing else uses the broker meanwhile (the suite runs it under
/tmp/mpw-services.lock). Skipped when the broker is not the local one, or with
MPW_PYTHON_SKIP_BROKER_RESTART=1.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
import uuid
from urllib.parse import urlsplit

import aio_pika
import pytest

from matrix_push_worker import PushRulesClient, PushRulesError

from .conftest import AMQP_URL, ROOT, Worker, client_for, new_user

SERVICES = ROOT / "scripts" / "services.sh"
LOCAL = (
    urlsplit(AMQP_URL).hostname in ("127.0.0.1", "localhost") and (urlsplit(AMQP_URL).port or 5672) == 5672
)

pytestmark = pytest.mark.skipif(
    not LOCAL or os.environ.get("MPW_PYTHON_SKIP_BROKER_RESTART") == "1" or not SERVICES.exists(),
    reason="needs the local RabbitMQ of scripts/services.sh (and MPW_PYTHON_SKIP_BROKER_RESTART unset)",
)


def services(command: str) -> None:
    environment = {key: value for key, value in os.environ.items() if key not in ("AMQP_URL", "MONGODB_URL")}
    subprocess.run([str(SERVICES), command], check=True, timeout=180, env=environment)


async def test_pending_calls_fail_fast_and_the_client_serves_again_after_a_restart(
    client: PushRulesClient, worker: Worker
) -> None:
    user = new_user("restart")
    assert "global" in await client.get_push_rules(user)

    # Calls that stay pending: a queue nobody consumes, on a second client, with a long deadline.
    unserved = f"pyclient.restart.{uuid.uuid4().hex[:8]}"
    declarer = await aio_pika.connect(AMQP_URL)
    channel = await declarer.channel()
    await channel.declare_queue(unserved, durable=False, auto_delete=False)
    waiting = client_for(worker.names, queue=unserved, read_queue=None, timeout=60.0)
    try:
        pending = [asyncio.ensure_future(waiting.get_pushers(user)) for _ in range(3)]
        await asyncio.sleep(0.5)
        try:
            await asyncio.to_thread(services, "stop-rabbitmq")
            failures = await asyncio.gather(*pending, return_exceptions=True)
            for failure in failures:
                assert isinstance(failure, PushRulesError), failure
                # Not `timeout`: they failed on the lost connection, not at their deadline.
                assert (failure.kind, failure.reason) == ("Unavailable", "connection-lost")
        finally:
            await asyncio.to_thread(services, "start-rabbitmq")

        # The same client instance, once the broker and the worker are back.
        answer = None
        deadline = time.monotonic() + 90
        while answer is None and time.monotonic() < deadline:
            try:
                answer = await client.get_push_rule_enabled(
                    user, "global", "override", ".m.rule.master", timeout=3
                )
            except PushRulesError:
                await asyncio.sleep(0.5)
        assert answer == {"enabled": False}
        assert await client.set_push_rule_enabled(user, "global", "override", ".m.rule.master", True) == {}
    finally:
        await waiting.close()
        with contextlib.suppress(Exception):
            await declarer.close()

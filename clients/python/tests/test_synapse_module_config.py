"""The Synapse module's `config:` block: defaults, and a clear refusal of each bad value."""

from __future__ import annotations

import re
from typing import Any

import pytest

from matrix_push_worker.synapse import PushWorkerModule
from matrix_push_worker.synapse_module_config import ModuleConfig, parse_module_config

MINIMAL = {"amqp_url": "amqp://guest:guest@127.0.0.1:5672", "publisher_user_id": "guest"}


def test_the_two_required_options_are_enough() -> None:
    assert PushWorkerModule.parse_config(MINIMAL) == ModuleConfig(
        amqp_url="amqp://guest:guest@127.0.0.1:5672",
        publisher_user_id="guest",
        queue="matrix.push.rpc",
        evaluate_queue="matrix.push.evaluate",
        deliver_queue="matrix.push.deliver",
        timeout_seconds=10.0,
        max_age_ms=3_600_000,
        max_pending_bytes=64 * 1024 * 1024,
        max_pending_account_calls=10_000,
        include_content=True,
        instance_name="master",
    )


def test_several_broker_nodes_as_a_list() -> None:
    config = parse_module_config({**MINIMAL, "amqp_url": ["amqp://a:5672", "amqp://b:5672"]})
    assert config.amqp_url == ("amqp://a:5672", "amqp://b:5672")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        pytest.param({"amqp_url": None}, "amqp_url is required", id="no URL"),
        pytest.param({"publisher_user_id": None}, "publisher_user_id is required", id="no publisher"),
        pytest.param({"amqp_url": 5672}, "amqp_url must be a URL or a list of URLs", id="URL not a string"),
        pytest.param(
            {"amqp_url": "http://x"}, "amqp_url: broker URL #1 must start with amqp://", id="not AMQP"
        ),
        pytest.param(
            {"publisher_user_id": ""}, "publisher_user_id must be a non-empty string", id="empty user"
        ),
        pytest.param(
            {"deliver_queue": 3}, "deliver_queue must be a non-empty string", id="queue not a string"
        ),
        pytest.param({"max_age_ms": 0}, "max_age_ms must be a positive integer", id="zero age"),
        pytest.param(
            {"max_pending_bytes": True}, "max_pending_bytes must be a positive integer", id="a boolean"
        ),
        pytest.param(
            {"max_pending_account_calls": 1.5},
            "max_pending_account_calls must be a positive integer",
            id="not whole",
        ),
        pytest.param(
            {"timeout_seconds": 0}, "timeout_seconds must be a number of seconds above 0", id="no time"
        ),
        pytest.param({"timeout_seconds": "10"}, "timeout_seconds must be a number", id="a string timeout"),
        pytest.param({"include_content": "yes"}, "include_content must be true or false", id="not a boolean"),
        pytest.param({"max_age": 5, "queues": 1}, "unknown option(s): max_age, queues", id="unknown options"),
    ],
)
def test_a_bad_option_is_refused_by_name(options: dict[str, Any], message: str) -> None:
    config = {key: value for key, value in {**MINIMAL, **options}.items() if value is not None}
    with pytest.raises(ValueError, match="^" + re.escape(message)):
        parse_module_config(config)


def test_a_refused_url_is_never_echoed() -> None:
    with pytest.raises(ValueError, match="broker URL #2") as refused:
        parse_module_config({**MINIMAL, "amqp_url": "amqp://guest:s3cret@a:5672,amqp://guest:s3cret@a b"})
    assert "s3cret" not in str(refused.value)

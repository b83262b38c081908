"""Every push-rule method against a real worker, and the Matrix error a missing rule gets."""

from __future__ import annotations

import pytest

from matrix_push_worker import PushRulesClient, PushRulesError
from matrix_push_worker.wire_types import RuleBody

from .conftest import known_user, new_user

KINDS = ["override", "content", "room", "sender", "underride"]


async def test_get_push_rules_answers_the_server_defaults_of_a_new_user(client: PushRulesClient) -> None:
    rules = await client.get_push_rules(new_user("defaults"))

    assert sorted(rules["global"]) == sorted(KINDS)
    assert any(rule["rule_id"] == ".m.rule.master" for rule in rules["global"]["override"])


async def test_a_rule_is_set_read_changed_and_deleted(client: PushRulesClient) -> None:
    user = await known_user(client, "rules")
    rule: RuleBody = {"pattern": "pizza", "actions": ["notify", {"set_tweak": "highlight"}]}

    assert await client.set_push_rule(user, "global", "content", "kw-pizza", rule) == {}
    stored = await client.get_push_rule(user, "global", "content", "kw-pizza")
    assert stored == {
        "rule_id": "kw-pizza",
        "default": False,
        "enabled": True,
        "pattern": "pizza",
        "actions": ["notify", {"set_tweak": "highlight"}],
    }

    assert await client.set_push_rule_actions(user, "global", "content", "kw-pizza", ["notify"]) == {}
    assert await client.get_push_rule_actions(user, "global", "content", "kw-pizza") == {
        "actions": ["notify"]
    }

    assert await client.set_push_rule_enabled(user, "global", "content", "kw-pizza", False) == {}
    assert await client.get_push_rule_enabled(user, "global", "content", "kw-pizza") == {"enabled": False}

    assert await client.delete_push_rule(user, "global", "content", "kw-pizza") == {}
    with pytest.raises(PushRulesError) as missing:
        await client.get_push_rule(user, "global", "content", "kw-pizza")
    assert missing.value.status == 404
    assert missing.value.errcode == "M_NOT_FOUND"
    assert missing.value.kind == "NotFound"
    assert missing.value.reason is None
    assert missing.value.to_matrix_body() == {"errcode": "M_NOT_FOUND", "error": missing.value.error}


async def test_before_and_after_place_a_rule(client: PushRulesClient) -> None:
    user = await known_user(client, "placement")
    # A new rule without a placement goes first in its kind, as in Synapse.
    for rule_id in ("c", "b"):
        await client.set_push_rule(user, "global", "content", rule_id, {"pattern": rule_id, "actions": []})

    await client.set_push_rule(user, "global", "content", "a", {"pattern": "a", "actions": []}, before="b")
    await client.set_push_rule(user, "global", "content", "d", {"pattern": "d", "actions": []}, after="c")

    content = (await client.get_push_rules(user))["global"]["content"]
    ids = [rule["rule_id"] for rule in content if not rule["default"]]
    assert ids == ["a", "b", "c", "d"]


async def test_a_write_sent_again_with_its_message_id_is_applied_once(client: PushRulesClient) -> None:
    user = await known_user(client, "idempotent")
    rule: RuleBody = {"pattern": "x", "actions": []}
    await client.set_push_rule(user, "global", "content", "once", rule, message_id="write-1")
    await client.delete_push_rule(user, "global", "content", "once")

    # The recorded reply, not a second application: the rule stays deleted.
    assert await client.set_push_rule(user, "global", "content", "once", rule, message_id="write-1") == {}
    with pytest.raises(PushRulesError) as missing:
        await client.get_push_rule(user, "global", "content", "once")
    assert missing.value.errcode == "M_NOT_FOUND"


@pytest.mark.parametrize(
    ("scope", "kind", "errcode", "status"),
    [
        ("device", "content", "M_INVALID_PARAM", 400),
        ("global", "nonsense", "M_BAD_JSON", 400),
    ],
)
async def test_a_bad_address_is_the_workers_matrix_error(
    client: PushRulesClient, scope: str, kind: str, errcode: str, status: int
) -> None:
    with pytest.raises(PushRulesError) as refused:
        await client.set_push_rule(
            await known_user(client, "bad"), scope, kind, "r", {"pattern": "p", "actions": []}
        )
    assert (refused.value.errcode, refused.value.status) == (errcode, status)

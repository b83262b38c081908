"""Pushers and the homeserver ops that remove them."""

from __future__ import annotations

from typing import Any

import pytest

from matrix_push_worker import PushRulesClient, PushRulesError

from .conftest import known_user, new_user


def http_pusher(pushkey: str, url: str = "https://push.example.org/_matrix/push/v1/notify") -> Any:
    return {
        "pushkey": pushkey,
        "kind": "http",
        "app_id": "org.example.app",
        "app_display_name": "Example",
        "device_display_name": "Phone",
        "lang": "en",
        "data": {"url": url},
    }


async def test_a_pusher_is_set_listed_with_its_device_and_deleted_by_device(client: PushRulesClient) -> None:
    user = new_user("pushers")
    assert await client.set_pusher(user, http_pusher("key-1"), device_id="PHONE") == {}
    assert await client.set_pusher(user, http_pusher("key-2"), device_id="LAPTOP") == {}

    pushers = (await client.get_pushers(user))["pushers"]
    assert {(p["pushkey"], p.get("device_id")) for p in pushers} == {("key-1", "PHONE"), ("key-2", "LAPTOP")}
    assert all(p["enabled"] and p["org.matrix.msc3881.enabled"] for p in pushers)

    assert await client.delete_pushers(user, device_ids=["PHONE"]) == {"deleted": 1}
    assert [p["pushkey"] for p in (await client.get_pushers(user))["pushers"]] == ["key-2"]

    assert await client.delete_pushers(user, except_device_id="OTHER") == {"deleted": 1}
    assert await client.get_pushers(user) == {"pushers": []}


async def test_delete_pushers_all_and_delete_user_data(client: PushRulesClient) -> None:
    user = await known_user(client, "deactivated")
    await client.set_pusher(user, http_pusher("key-1"), device_id="PHONE")
    assert await client.delete_pushers(user, all=True, include_email=True) == {"deleted": 1}

    await client.set_pusher(user, http_pusher("key-2"))
    await client.set_push_rule(user, "global", "content", "mine", {"pattern": "x", "actions": []})
    assert await client.delete_user_data(user) == {}
    assert await client.get_pushers(user) == {"pushers": []}
    content = (await client.get_push_rules(user))["global"]["content"]
    assert all(rule["default"] for rule in content)


async def test_delete_pushers_without_a_selector_is_refused_by_the_workers(client: PushRulesClient) -> None:
    with pytest.raises(PushRulesError) as refused:
        await client.delete_pushers(new_user("nothing"))
    assert refused.value.errcode == "M_BAD_JSON"

"""The grouped recipients form (`recipients_by_server`, docs/rpc-contract.md) the client sends for a
large room, and the order its `runs` count in. No broker: the grouping is pure."""

from __future__ import annotations

import pytest

from matrix_push_worker.evaluate import group_recipients_by_server
from matrix_push_worker.wire_types import EvaluationRecipient, RecipientsOfServer

ALICE: EvaluationRecipient = {"user_id": "@alice:one.example"}
BOB: EvaluationRecipient = {"user_id": "@bob:two.example:8448", "display_name": "Bob"}
CAROL: EvaluationRecipient = {"user_id": "@carol:one.example", "display_name": "Carol"}
DAN: EvaluationRecipient = {"user_id": "@dan:two.example:8448"}


def test_groups_by_server_in_first_seen_order_and_orders_recipients_as_the_groups_name_them() -> None:
    grouped = group_recipients_by_server([ALICE, BOB, CAROL, DAN])
    expected: list[RecipientsOfServer] = [
        {"server": "one.example", "localparts": ["alice", "carol"], "display_names": [None, "Carol"]},
        {"server": "two.example:8448", "localparts": ["bob", "dan"], "display_names": ["Bob", None]},
    ]
    assert grouped == (expected, [ALICE, CAROL, BOB, DAN])


def test_a_group_without_any_display_name_carries_none_of_them() -> None:
    grouped = group_recipients_by_server([ALICE, {"user_id": "@erin:one.example"}])
    assert grouped is not None
    assert grouped[0] == [{"server": "one.example", "localparts": ["alice", "erin"]}]


@pytest.mark.parametrize("user_id", ["alice:one.example", "@alice", "", "alice"])
def test_a_user_id_without_sigil_or_server_leaves_the_plain_form(user_id: str) -> None:
    assert group_recipients_by_server([ALICE, {"user_id": user_id}]) is None

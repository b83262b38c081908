"""The Python client's wire adapter for the conformance run (docs/rpc-contract.md#examples).

`python -m matrix_push_worker.wire` reads one JSON line per request on stdin, `{"id", "request"}`
(the request body as on the wire, with its `op`, and `message_id` for a write's idempotency key),
calls `PushRulesClient`'s typed method for that op (never a raw publish: the run tests the client),
and writes one line per answer on stdout as each comes, in any order: `{"id", "reply"}` with the
reply envelope, `{"ok": true, "body"}` or `{"ok": false, "error": {"kind", "errcode", "error",
"status"}}` from the `PushRulesError` the method raised; or `{"id", "adapter_error"}` for a line no
typed call expresses. Settings: `AMQP_URL` (required), `PUBLISHER_USER_ID` (absent or empty: no
AMQP `user_id`). Exits once stdin ends and every answer is written.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, cast

from .client import PushRulesClient
from .errors import PushRulesError
from .evaluate import EvaluateManyEvent
from .wire_types import (
    EvaluationEvent,
    EvaluationRecipient,
    EvaluationRoom,
    NotifyNotification,
    NotifyRecipient,
    PushAction,
    PusherSetAction,
    RuleBody,
)

Body = Mapping[str, Any]


class WireRequestError(Exception):
    """A request that no call of a typed method expresses: the runner counts it as a failure."""


def _text(body: Body, key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str):
        raise WireRequestError(f"{key} must be a string for the typed method")
    return value


def _optional_text(body: Body, key: str) -> str | None:
    return None if body.get(key) is None else _text(body, key)


def _flag(body: Body, key: str) -> bool:
    value = body.get(key)
    if not isinstance(value, bool):
        raise WireRequestError(f"{key} must be a boolean for the typed method")
    return value


def _list(body: Body, key: str) -> list[Any]:
    value = body.get(key)
    if not isinstance(value, list):
        raise WireRequestError(f"{key} must be an array for the typed method")
    return value


def _object(body: Body, key: str) -> dict[str, Any]:
    value = body.get(key)
    if not isinstance(value, dict):
        raise WireRequestError(f"{key} must be an object for the typed method")
    return value


def _address(body: Body) -> tuple[str, str, str, str]:
    return _text(body, "user_id"), _text(body, "scope"), _text(body, "kind"), _text(body, "rule_id")


def _texts(body: Body, key: str) -> list[str]:
    values = _list(body, key)
    if not all(isinstance(value, str) for value in values):
        raise WireRequestError(f"every entry of {key} must be a string for the typed method")
    return cast(list[str], values)


def _selector(body: Body) -> dict[str, Any]:
    """The one selector `delete_pushers` is given: two, none or `all: false` it cannot express."""
    given: dict[str, Any] = {}
    if "device_ids" in body:
        given["device_ids"] = _texts(body, "device_ids")
    if "except_device_id" in body:
        given["except_device_id"] = _text(body, "except_device_id")
    if "all" in body:
        if not _flag(body, "all"):
            raise WireRequestError("all: false cannot be expressed by the typed method")
        given["all"] = True
    if len(given) != 1:
        raise WireRequestError("delete_pushers takes exactly one of device_ids, except_device_id and all")
    return given


def _evaluate_event(body: Body) -> EvaluateManyEvent:
    # JSON forwarded as the homeserver has it: the workers refuse what is not an event or a room.
    event: EvaluateManyEvent = {
        "event": cast(EvaluationEvent, _object(body, "event")),
        "room": cast(EvaluationRoom, _object(body, "room")),
        "recipients": cast(Sequence[EvaluationRecipient], _list(body, "recipients")),
    }
    if body.get("explain") is not None:
        event["explain"] = _flag(body, "explain")
    return event


def _envelope(answer: Any) -> dict[str, Any]:
    if isinstance(answer, PushRulesError):
        error = {
            "kind": answer.kind,
            "errcode": answer.errcode,
            "error": answer.error,
            "status": answer.status,
        }
        return {"ok": False, "error": error}
    return {"ok": True, "body": answer}


async def _call(client: PushRulesClient, body: Body) -> Any:
    """What the typed method for the request's op returns (raising `PushRulesError` as it does)."""
    op = _text(body, "op")
    message_id = _optional_text(body, "message_id")
    if op == "get_pushrules":
        return await client.get_push_rules(_text(body, "user_id"))
    if op == "get_pushrule":
        return await client.get_push_rule(*_address(body))
    if op == "set_pushrule":
        # The rule as the homeserver's caller sent it: the workers judge it.
        rule = cast(RuleBody, _object(body, "rule"))
        before, after = _optional_text(body, "before"), _optional_text(body, "after")
        return await client.set_push_rule(*_address(body), rule, before, after, message_id=message_id)
    if op == "delete_pushrule":
        return await client.delete_push_rule(*_address(body), message_id=message_id)
    if op == "get_pushrule_actions":
        return await client.get_push_rule_actions(*_address(body))
    if op == "set_pushrule_actions":
        actions = cast(list[PushAction], _list(body, "actions"))
        return await client.set_push_rule_actions(*_address(body), actions, message_id=message_id)
    if op == "get_pushrule_enabled":
        return await client.get_push_rule_enabled(*_address(body))
    if op == "set_pushrule_enabled":
        enabled = _flag(body, "enabled")
        return await client.set_push_rule_enabled(*_address(body), enabled, message_id=message_id)
    if op == "get_pushers":
        return await client.get_pushers(_text(body, "user_id"))
    if op == "set_pusher":
        action = cast(PusherSetAction, _object(body, "action"))
        device_id = _optional_text(body, "device_id")
        return await client.set_pusher(_text(body, "user_id"), action, device_id, message_id=message_id)
    if op == "delete_pushers":
        include_email = False if body.get("include_email") is None else _flag(body, "include_email")
        return await client.delete_pushers(
            _text(body, "user_id"), **_selector(body), include_email=include_email, message_id=message_id
        )
    if op == "delete_user_data":
        return await client.delete_user_data(_text(body, "user_id"), message_id=message_id)
    if op == "evaluate":
        if "events" not in body:
            one = _evaluate_event(body)
            return await client.evaluate(
                one["event"], one["room"], one["recipients"], one.get("explain", False)
            )
        entries = _list(body, "events")
        if not all(isinstance(entry, dict) for entry in entries):
            raise WireRequestError("every entry of events must be an object for the typed method")
        answers = await client.evaluate_many([_evaluate_event(entry) for entry in entries])
        return {"results": [_envelope(answer) for answer in answers]}
    if op == "notify":
        # Always with the reply: the envelope has a body only then.
        notification = cast(NotifyNotification, _object(body, "notification"))
        recipients = cast(list[NotifyRecipient], _list(body, "recipients"))
        return await client.notify(notification, recipients, True, message_id)
    raise WireRequestError(f"no typed method for op {json.dumps(op)}")


async def _answer(client: PushRulesClient, line: str) -> dict[str, Any]:
    line_id: Any = None
    try:
        parsed = json.loads(line)
        line_id = parsed.get("id") if isinstance(parsed, dict) else None
        request = parsed.get("request") if isinstance(parsed, dict) else None
        if not isinstance(line_id, str):
            raise WireRequestError("the line has no string id")
        if not isinstance(request, dict):
            raise WireRequestError("the line has no request object")
        try:
            answer = await _call(client, request)
        except PushRulesError as error:
            answer = error
        return {"id": line_id, "reply": _envelope(answer)}
    except Exception as error:  # anything else is not the client's answer: the runner shows it
        return {"id": line_id, "adapter_error": f"{type(error).__name__}: {error}"}


def _write(answer: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(answer, separators=(",", ":")) + "\n")
    sys.stdout.flush()


async def main() -> int:
    url = os.environ.get("AMQP_URL")
    if not url:
        sys.stderr.write("wire: AMQP_URL is required\n")
        return 2
    client = PushRulesClient(url, os.environ.get("PUBLISHER_USER_ID") or None)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 26)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    pending: set[asyncio.Task[None]] = set()

    async def serve(line: str) -> None:
        _write(await _answer(client, line))

    try:
        while line := await reader.readline():
            text = line.decode("utf-8").strip()
            if text:
                task = asyncio.create_task(serve(text))
                pending.add(task)
                task.add_done_callback(pending.discard)
        await asyncio.gather(*pending)
    finally:
        await client.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

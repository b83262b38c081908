"""`evaluate()` calls gathered into messages of the batch form, as the TypeScript and Rust clients
gather them (docs/client.md, "Many events in one message").

A call made while no message is out goes at once, alone, in the single form: a lone caller waits
for nothing and sends what it always sent. A call made while a message is out waits in a queue,
which goes as one message when the last message out has been answered, when it reaches
`max_events`, `max_bytes` or `max_recipients`, or `window` after its first call. Under load the
events of many callers share one message, one reply and one bulk read of their recipients' rules;
a message out for long (a large room) delays the others by `window` at most. One queued event goes
in the single form too.

Each call keeps its own deadline: it fails with `timeout` at its own time even if its message is
still out; a message's deadline is the latest of its calls'.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, cast

from .errors import PushRulesError
from .wire_types import EvaluateEntry, Reply


@dataclass(frozen=True)
class EvaluateCoalescing:
    """How `evaluate()` calls are gathered into one message. The defaults are the other clients'."""

    window: float = 0.0005
    """How long a call may wait for others to join its message while another is out, in seconds.
    asyncio's selector sleeps whole milliseconds, so 0.5 ms waits up to about 1 ms."""
    max_events: int = 64
    """Events per message at most; the workers take `evaluate.maxBatchEvents` (256)."""
    max_bytes: int = 1 << 20
    """The events' JSON per message at most, in bytes; the workers take `evaluate.maxRequestBytes`
    (4 MiB)."""
    max_recipients: int = 20_000
    """Recipients of the events of one message together at most: the workers'
    `evaluate.maxBatchRecipients`."""
    max_json_depth: int = 32
    """The workers' `limits.maxJsonDepth`. The batch form nests an event two levels deeper than the
    single form: an event deeper than this less two goes alone, and fails alone if it must."""


SendEvaluate = Callable[[Any, float], Awaitable[Reply]]
"""Sends one message to the evaluate queue and waits for its reply for at most the seconds given:
the client's RPC (which takes an object, or `bytes` already encoded), or a test's stand-in. Raises
`PushRulesError` only."""

# A batch refused as a whole with one of these is sent again, each event alone: the refusal may be
# one event's doing (a depth or size the batch form adds, a total past the workers' caps, a worker
# that predates the batch form), and alone each gets its own answer. Other refusals (Unavailable)
# each event would meet alone too.
_RESENT_ALONE = frozenset({"TooLarge", "BadJson"})


@dataclass(eq=False)
class _Waiting:
    json: bytes
    """Its entry: the single form without `op`."""
    recipients: int
    deadline: float
    """On `time.monotonic()`'s clock."""
    answer: asyncio.Future[Reply]
    """Done once answered, or once its caller stopped waiting (deadline, cancelled): not sent then."""


class EvaluateCoalescer:
    """Gathers `evaluate` calls into messages and hands each caller its own event's reply envelope.

    Not thread-safe: every call on one loop, its timers and message tasks on that loop too (the
    Synapse module's own thread's, for its client)."""

    def __init__(self, send: SendEvaluate, default_timeout: float, settings: EvaluateCoalescing) -> None:
        self._send = send
        self._default_timeout = default_timeout
        self._window = settings.window
        self._max_events = max(1, settings.max_events)
        self._max_bytes = settings.max_bytes
        self._max_recipients = settings.max_recipients
        self._batch_depth = settings.max_json_depth - 2
        self._queue: list[_Waiting] = []
        self._queued_bytes = 0
        self._queued_recipients = 0
        self._window_timer: asyncio.TimerHandle | None = None
        self._outstanding = 0
        """Messages sent and not yet answered, or answered and holding the way for their callers'
        next calls (see `_finish`)."""
        self._messages: set[asyncio.Task[None]] = set()
        """The tasks sending queued messages: held, so that none is collected midway."""

    async def evaluate(self, entry: EvaluateEntry, timeout: float | None = None) -> Reply:
        """One event's reply envelope. Raises `PushRulesError`: a transport failure (no reply for
        it), or `BadJson` for an event that is not JSON (nothing sent)."""
        seconds = self._default_timeout if timeout is None else timeout
        if self._outstanding == 0 and not self._queue:
            # Sent as the object it is: byte for byte what the client sent before it coalesced.
            return await self._alone({"op": "evaluate", **entry}, seconds)
        encoded = _encode(entry)
        # Never in a batch: the single form takes it, or refuses it alone.
        if nests_deeper_than(encoded, self._batch_depth):
            return await self._alone({"op": "evaluate", **entry}, seconds)
        loop = asyncio.get_running_loop()
        waiting = _Waiting(encoded, recipient_count(entry), time.monotonic() + seconds, loop.create_future())
        timer = loop.call_later(seconds, _time_up, waiting.answer)
        self._enqueue(waiting)
        try:
            return await waiting.answer
        finally:
            timer.cancel()

    def close(self) -> None:
        """Fails the calls still waiting with `closed` (the messages out fail with the connection)."""
        queued = self._take_queue()
        for waiting in queued:
            if not waiting.answer.done():
                waiting.answer.set_exception(PushRulesError.from_transport("closed"))

    # ---- gathering ---------------------------------------------------------------

    async def _alone(self, body: dict[str, Any], seconds: float) -> Reply:
        """One event sent now, in the caller's task, counted as out until answered."""
        self._outstanding += 1
        try:
            return await self._send(body, seconds)
        finally:
            self._finish(1)

    def _enqueue(self, waiting: _Waiting) -> None:
        size = len(waiting.json)
        if self._queue and (
            self._queued_bytes + size > self._max_bytes
            or self._queued_recipients + waiting.recipients > self._max_recipients
        ):
            self._flush()
        self._queue.append(waiting)
        self._queued_bytes += size
        self._queued_recipients += waiting.recipients
        if (
            len(self._queue) >= self._max_events
            or self._queued_bytes >= self._max_bytes
            or self._queued_recipients >= self._max_recipients
        ):
            self._flush()
        elif self._window_timer is None:
            self._window_timer = asyncio.get_running_loop().call_later(self._window, self._flush)

    def _take_queue(self) -> list[_Waiting]:
        if self._window_timer is not None:
            self._window_timer.cancel()
            self._window_timer = None
        queued, self._queue = self._queue, []
        self._queued_bytes = 0
        self._queued_recipients = 0
        return queued

    def _flush(self) -> None:
        """Sends what is queued, those still waited for, as one message."""
        queued = [waiting for waiting in self._take_queue() if not waiting.answer.done()]
        if queued:
            self._spawn(queued)

    def _spawn(self, waiting: list[_Waiting]) -> None:
        self._outstanding += 1
        task = asyncio.get_running_loop().create_task(self._message(waiting))
        self._messages.add(task)
        task.add_done_callback(self._messages.discard)

    async def _message(self, waiting: list[_Waiting]) -> None:
        """One message for `waiting`, already counted as out: the single form for one event, else
        the batch form; its deadline the latest of its calls'."""
        try:
            if len(waiting) == 1:
                body = b'{"op":"evaluate",' + waiting[0].json[1:]
            else:
                body = b'{"op":"evaluate","events":[' + b",".join(w.json for w in waiting) + b"]}"
            seconds = max(0.001, max(w.deadline for w in waiting) - time.monotonic())
            try:
                reply = await self._send(body, seconds)
            except PushRulesError as error:
                for w in waiting:
                    _settle(w, error=_copy(error))
                return
            except Exception as error:
                # Not the RPC's way to fail: its callers see it rather than wait for their deadline.
                for w in waiting:
                    _settle(w, error=error)
                return
            self._answer(waiting, reply)
        finally:
            self._finish(len(waiting))

    def _answer(self, waiting: list[_Waiting], reply: Reply) -> None:
        if len(waiting) == 1:
            _settle(waiting[0], reply=reply)
            return
        if not reply["ok"]:
            if reply["error"]["kind"] in _RESENT_ALONE:
                # Each with what is left of its own deadline; one whose time is up has failed.
                for w in waiting:
                    if not w.answer.done():
                        self._spawn([w])
                return
            # Refused for a reason each event would meet alone: every event's answer.
            for w in waiting:
                _settle(w, reply=reply)
            return
        results = _results(reply["body"], len(waiting))
        for index, w in enumerate(waiting):
            if results is None:
                _settle(w, error=PushRulesError.from_transport("bad-reply"))
            else:
                _settle(w, reply=results[index])

    def _finish(self, events: int) -> None:
        """Counts a message as answered. One of several events holds the way until its callers have
        run (the callbacks its answers scheduled run first), so that the calls they make at once
        when answered queue up and go together; one of one event frees it at once (its caller
        calling again goes alone, as a lone caller does) unless calls are queued behind it, which
        then go with whatever its caller sends next."""
        if events > 1 or (self._outstanding == 1 and self._queue):
            asyncio.get_running_loop().call_soon(self._release)
        else:
            self._release()

    def _release(self) -> None:
        self._outstanding -= 1
        if self._outstanding == 0 and self._queue:
            self._flush()


def _time_up(answer: asyncio.Future[Reply]) -> None:
    if not answer.done():
        answer.set_exception(PushRulesError.from_transport("timeout"))


def _settle(waiting: _Waiting, *, reply: Reply | None = None, error: Exception | None = None) -> None:
    if waiting.answer.done():
        return
    if error is not None:
        waiting.answer.set_exception(error)
    else:
        waiting.answer.set_result(cast(Reply, reply))


def _copy(error: PushRulesError) -> PushRulesError:
    """Each caller its own exception: one raised in several tasks would share its traceback."""
    body = {"kind": error.kind, "errcode": error.errcode, "status": error.status, "error": error.error}
    return PushRulesError(cast(Any, body), error.reason)


def _encode(entry: EvaluateEntry) -> bytes:
    try:
        return json.dumps(entry, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    except (TypeError, ValueError, RecursionError) as error:
        raise PushRulesError.unserializable(str(error)) from None


def recipient_count(entry: EvaluateEntry) -> int:
    """The recipients an entry names, in either form."""
    recipients = entry.get("recipients")
    if recipients is not None:
        return len(recipients)
    return sum(len(group["localparts"]) for group in entry.get("recipients_by_server", []))


def nests_deeper_than(text: bytes, limit: int) -> bool:
    """Whether JSON text nests arrays and objects more than `limit` levels deep (`{}` one level),
    as the workers count it: brackets inside strings do not count. `text` is what was just encoded
    (valid JSON): the strings are cut out by a regular expression and the brackets left counted, so
    that the walk in Python is over brackets only, and none at all for an entry with few of them
    (a large room's, its recipients grouped by server)."""
    if text.count(b"{") + text.count(b"[") <= limit:
        return False
    depth = 0
    for bracket in _BRACKET.findall(_STRING.sub(b"", text)):
        if bracket in (b"{", b"["):
            depth += 1
            if depth > limit:
                return True
        else:
            depth -= 1
    return False


_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
"""A JSON string: a backslash escapes the character after it."""
_BRACKET = re.compile(rb"[\[\]{}]")


def _results(body: object, count: int) -> list[Reply] | None:
    """The batch reply's `results`, when it holds one envelope per event."""
    results = body.get("results") if isinstance(body, dict) else None
    if not isinstance(results, list) or len(results) != count:
        return None
    if not all(isinstance(result, dict) and "ok" in result for result in results):
        return None
    return cast(list[Reply], results)

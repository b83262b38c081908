"""The Synapse module's own thread: an asyncio loop that hands events and account calls to the pool.

Synapse runs Twisted, whose default reactor has no asyncio loop, and a module must never hold it up:
the module's callbacks only build plain data (`EventPush`, `AccountCall`) and add it to a bounded
line here (`submit_*`: any thread, never blocks, never raises), and this thread's loop makes every
call through one `PushRulesClient`. Per event: `evaluate` (the batch form, several events in one
message), the `Checks` Synapse answers (through `checks`, which runs in Synapse's thread), then
`notify`. While the pool does not answer, the work waits in its line and is tried again with a
growing pause; an event older than `max_age_seconds` is dropped instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from .client import PushRulesClient
from .errors import PushRulesError
from .evaluate import EvaluateManyEvent
from .pending_pushes import Dropped, Pending, PendingLine
from .synapse_event_plan import Checks, EventPush, notify_messages
from .wire_types import PushAction

CheckHook = Callable[[list[tuple[Checks, frozenset[str]]]], Awaitable[list[frozenset[str]]]]
"""Given each event's checks and the users the pool notified, the users who may be pushed."""

COUNTERS = (
    "events_queued",
    "events_pushed",
    "events_notifying_nobody",
    "events_dropped",
    "events_expired",
    "events_failed",
    "pool_unavailable",
    "account_calls_done",
    "account_calls_failed",
    "account_calls_dropped",
)


@dataclass(frozen=True)
class AccountCall:
    kind: Literal["delete_pushers", "delete_user_data"]
    user_id: str
    device_id: str | None = None
    message_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    """Made once when the account event happens: every retry sends the same one."""


@dataclass(frozen=True)
class PipelineSettings:
    max_pending_bytes: int = 64 * 1024 * 1024
    max_pending_account_calls: int = 10_000
    max_age_seconds: float = 3600.0
    timeout_seconds: float = 10.0
    evaluate_max_recipients: int = 20_000
    """Recipients of one `evaluate` message (the workers' `evaluate.maxBatchRecipients`)."""
    events_per_evaluate: int = 64
    retry_base_seconds: float = 0.5
    retry_max_seconds: float = 30.0


class Counters:
    """What happened to the module's work, by outcome; read from any thread."""

    def __init__(self) -> None:
        self._values = dict.fromkeys(COUNTERS, 0)
        self._lock = threading.Lock()

    def add(self, name: str, count: int = 1) -> None:
        with self._lock:
            self._values[name] += count

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._values)


def transient(error: PushRulesError) -> bool:
    """No answer (a transport failure) or `Unavailable`: the same call may succeed later."""
    return error.reason is not None or error.kind == "Unavailable"


class PushPipeline:
    def __init__(
        self,
        settings: PipelineSettings,
        client_factory: Callable[[], PushRulesClient],
        *,
        checks: CheckHook | None = None,
        logger: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._settings = settings
        self._client_factory = client_factory
        self._checks = checks
        self._log = logger or logging.getLogger(__name__)
        self._clock = clock
        self.counters = Counters()
        self.events: PendingLine[EventPush] = PendingLine(
            max_size=settings.max_pending_bytes, max_age=settings.max_age_seconds, clock=clock
        )
        self.account_calls: PendingLine[AccountCall] = PendingLine(
            max_size=settings.max_pending_account_calls, max_age=None, clock=clock
        )
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False
        self._wake: asyncio.Event | None = None
        self._stop: asyncio.Event | None = None
        self._outage_since: float | None = None
        self._failures = 0
        self._last_drop_log = -float("inf")

    # ---- any thread ------------------------------------------------------------

    def submit_event(self, push: EventPush) -> None:
        """Takes an event in to be pushed; returns at once."""
        dropped = self.events.add(push, push.size)
        if not any(each.item is push for each in dropped):
            self.counters.add("events_queued")
        self._note_dropped(dropped, "events_dropped")
        self._poke()

    def submit_account(self, call: AccountCall) -> None:
        """Takes an account call in; returns at once."""
        self._note_dropped(self.account_calls.add(call, 1), "account_calls_dropped")
        self._poke()

    def close(self, timeout: float = 5.0) -> None:
        """Stops the thread after the call under way (waiting at most `timeout`); what waits is lost."""
        with self._lock:
            self._closed = True
            thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(self._request_stop)
        thread.join(timeout)

    def _poke(self) -> None:
        with self._lock:
            if self._closed:
                return
            if self._thread is None:
                self._loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self._main, name="matrix-push-worker", daemon=True)
                self._thread.start()
            loop = self._loop
        assert loop is not None
        with contextlib.suppress(RuntimeError):  # the loop closed under us: the thread is gone
            loop.call_soon_threadsafe(self._wake_up)

    def _note_dropped(
        self, dropped: Sequence[Dropped[EventPush] | Dropped[AccountCall]], counter: str
    ) -> None:
        if not dropped:
            return
        self.counters.add(counter, len(dropped))
        now = self._clock()
        if now - self._last_drop_log >= 60:
            self._last_drop_log = now
            self._log.warning(
                "%d %s dropped: the module's line for the pool is full (%d events, %d bytes, %d account "
                "calls wait)",
                len(dropped),
                "account calls" if counter == "account_calls_dropped" else "events",
                len(self.events),
                self.events.size,
                len(self.account_calls),
            )

    # ---- the module's thread ---------------------------------------------------

    def _main(self) -> None:
        loop = self._loop
        assert loop is not None
        asyncio.set_event_loop(loop)
        try:
            loop.run_until_complete(self._run())
        except Exception:
            self._log.exception("the push thread stopped")
        finally:
            loop.close()

    def _wake_up(self) -> None:
        if self._wake is not None:
            self._wake.set()

    def _request_stop(self) -> None:
        if self._stop is not None:
            self._stop.set()
        self._wake_up()

    async def _run(self) -> None:
        self._wake = asyncio.Event()
        self._stop = asyncio.Event()
        if self._closed:
            return
        client = self._client_factory()
        try:
            while not self._stop.is_set():
                self._expire()
                try:
                    answered = await self._round(client)
                except Exception:
                    self._log.exception("handing work to the pool failed unexpectedly; trying again")
                    self.events.release_all()
                    self.account_calls.release_all()
                    answered = False
                if answered is None:
                    self._wake.clear()
                    if len(self.events) == 0 and len(self.account_calls) == 0:
                        await self._wake.wait()
                elif answered:
                    self._recovered()
                else:
                    await self._back_off()
        finally:
            await client.close()

    async def _round(self, client: PushRulesClient) -> bool | None:
        """One call or batch: True when the pool answered, False when it did not, None with no work."""
        calls = self.account_calls.take(lambda taken, following: False)
        if calls:
            return await self._account_call(client, calls[0])
        batch = self.events.take(self._fits)
        if batch:
            return await self._push(client, batch)
        return None

    def _fits(self, taken: list[Pending[EventPush]], following: Pending[EventPush]) -> bool:
        recipients = sum(len(entry.item.recipients) for entry in taken) + len(following.item.recipients)
        return (
            len(taken) < self._settings.events_per_evaluate
            and recipients <= self._settings.evaluate_max_recipients
        )

    async def _account_call(self, client: PushRulesClient, entry: Pending[AccountCall]) -> bool:
        call = entry.item
        timeout = self._settings.timeout_seconds
        try:
            if call.kind == "delete_user_data":
                await client.delete_user_data(call.user_id, timeout=timeout, message_id=call.message_id)
            else:
                device_ids = [] if call.device_id is None else [call.device_id]
                await client.delete_pushers(
                    call.user_id, device_ids=device_ids, timeout=timeout, message_id=call.message_id
                )
        except PushRulesError as error:
            if transient(error):
                self.account_calls.release([entry])
                self._unavailable(error)
                return False
            self._log.error("the pool refused %s for %s: %r", call.kind, call.user_id, error)
            self.counters.add("account_calls_failed")
            self.account_calls.done(entry)
            return True
        self.counters.add("account_calls_done")
        self.account_calls.done(entry)
        return True

    async def _push(self, client: PushRulesClient, batch: list[Pending[EventPush]]) -> bool:
        fresh = [entry for entry in batch if entry.messages is None]
        if fresh and not await self._evaluate(client, fresh):
            self.events.release(batch)
            return False
        for position, entry in enumerate(batch):
            messages = entry.messages
            if messages is None:  # refused for good while evaluated: already counted and dropped
                continue
            while entry.published < len(messages):
                message_id, recipients = messages[entry.published]
                try:
                    await client.notify(
                        entry.item.notification,
                        recipients,
                        message_id=message_id,
                        timeout=self._settings.timeout_seconds,
                    )
                except PushRulesError as error:
                    if transient(error):
                        self.events.release(batch[position:])
                        self._unavailable(error)
                        return False
                    self._log.error("the pool refused the notify of %s: %r", entry.item.event_id, error)
                    self.counters.add("events_failed")
                    break
                entry.published += 1
            else:
                self.counters.add("events_pushed" if messages else "events_notifying_nobody")
            self.events.done(entry)
        return True

    async def _evaluate(self, client: PushRulesClient, entries: list[Pending[EventPush]]) -> bool:
        """Evaluates `entries` and sets their `messages`; False when the pool did not answer (nothing
        set). An event the pool refuses for good is logged, counted and dropped."""
        limit = self._settings.evaluate_max_recipients
        items: list[EvaluateManyEvent] = []
        owners: list[Pending[EventPush]] = []
        for entry in entries:
            push = entry.item
            for start in range(0, max(1, len(push.recipients)), limit):
                chunk = push.recipients[start : start + limit]
                items.append({"event": push.event, "room": push.room, "recipients": chunk})
                owners.append(entry)
        answers = await client.evaluate_many(items, timeout=self._settings.timeout_seconds)
        notified: dict[Pending[EventPush], dict[str, list[PushAction]]] = {entry: {} for entry in entries}
        refused: dict[Pending[EventPush], PushRulesError] = {}
        for owner, answer in zip(owners, answers, strict=True):
            if isinstance(answer, PushRulesError):
                if transient(answer):
                    self._unavailable(answer)
                    return False
                refused.setdefault(owner, answer)
            else:
                notified[owner].update(answer["notify"])
        for entry, error in refused.items():
            self._log.error("the pool refused to evaluate %s: %r", entry.item.event_id, error)
            self.counters.add("events_failed")
            self.events.done(entry)
            del notified[entry]
        await self._apply_checks(notified)
        for entry, users in notified.items():
            entry.messages = notify_messages(entry.item, users)
        return True

    async def _apply_checks(self, notified: dict[Pending[EventPush], dict[str, list[PushAction]]]) -> None:
        """Leaves in `notified` only whom Synapse's checks allow; an event whose checks cannot be
        answered is dropped (pushing someone who ignores the sender is worse than pushing nobody)."""
        asking = [entry for entry, users in notified.items() if users and entry.item.checks.needed]
        if not asking or self._checks is None:
            return
        questions = [(entry.item.checks, frozenset(notified[entry])) for entry in asking]
        try:
            allowed = await asyncio.wait_for(self._checks(questions), self._settings.timeout_seconds * 3)
        except Exception as error:
            self._log.error("Synapse did not answer the checks of %d events, dropped: %r", len(asking), error)
            for entry in asking:
                self.counters.add("events_failed")
                self.events.done(entry)
                del notified[entry]
            return
        for entry, users in zip(asking, allowed, strict=True):
            notified[entry] = {user: actions for user, actions in notified[entry].items() if user in users}

    def _expire(self) -> None:
        expired = self.events.expire()
        if expired:
            self.counters.add("events_expired", len(expired))
            self._log.warning(
                "%d events dropped: not handed to the pool within %.0f s",
                len(expired),
                self._settings.max_age_seconds,
            )

    def _unavailable(self, error: PushRulesError) -> None:
        self.counters.add("pool_unavailable")
        self._failures += 1
        if self._outage_since is None:
            self._outage_since = self._clock()
            self._log.warning(
                "the push pool does not answer (%s); %d events and %d account calls wait, tried again",
                error,
                len(self.events),
                len(self.account_calls),
            )

    def _recovered(self) -> None:
        self._failures = 0
        if self._outage_since is not None:
            self._log.warning("the push pool answers again, after %.1f s", self._clock() - self._outage_since)
            self._outage_since = None

    async def _back_off(self) -> None:
        settings = self._settings
        cap = min(settings.retry_max_seconds, settings.retry_base_seconds * 2 ** max(0, self._failures - 1))
        delay = max(settings.retry_base_seconds, cap * random.random())
        assert self._stop is not None
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._stop.wait(), delay)

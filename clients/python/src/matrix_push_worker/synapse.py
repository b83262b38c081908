"""`PushWorkerModule`: a Synapse module that hands Synapse's pushes to the pool (docs/synapse-module.md).

```yaml
modules:
  - module: matrix_push_worker.synapse.PushWorkerModule
    config:
      amqp_url: "amqp://guest:guest@127.0.0.1:5672"
      publisher_user_id: "guest"
```

Synapse is not a dependency of this package: what the module uses of Synapse's module API, events
and reactor is typed by the protocols here and in `synapse_objects`, and Twisted's reactor is
looked up when Synapse loads the module. The callbacks never wait on the pool and never raise: they
build plain data in Synapse's thread and hand it to the module's own thread (`PushPipeline`).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import logging
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Protocol, TypeVar, cast

from .client import PushRulesClient
from .push_pipeline import COUNTERS, AccountCall, PipelineSettings, PushPipeline
from .synapse_event_plan import Checks, Skipped, ignores, invites_blocked, plan_event
from .synapse_module_config import ModuleConfig, parse_module_config
from .synapse_objects import EventLike, StateMap

logger = logging.getLogger(__name__)

T = TypeVar("T")

IGNORED_USER_LIST = "m.ignored_user_list"
INVITE_PERMISSION_CONFIG = "m.invite_permission_config"


class AccountDataManagerLike(Protocol):
    def get_global(self, user_id: str, data_type: str) -> Awaitable[Mapping[str, Any] | None]: ...


class ModuleApiLike(Protocol):
    """What the module uses of Synapse's `ModuleApi` (each there since Synapse 1.57 or earlier)."""

    @property
    def server_name(self) -> str: ...
    @property
    def worker_name(self) -> str | None: ...
    @property
    def account_data_manager(self) -> AccountDataManagerLike: ...
    def register_third_party_rules_callbacks(self, **callbacks: Any) -> None: ...
    def register_password_auth_provider_callbacks(self, **callbacks: Any) -> None: ...
    def run_db_interaction(self, desc: str, func: Callable[..., T], *args: Any) -> Awaitable[T]: ...
    def run_as_background_process(
        self, desc: str, func: Callable[..., Awaitable[None]], *args: Any
    ) -> object: ...


class ReactorLike(Protocol):
    # Twisted's names.
    def callFromThread(self, f: Callable[..., object], *args: Any) -> None: ...
    def addSystemEventTrigger(
        self, phase: str, event_type: str, f: Callable[..., object], *args: Any
    ) -> object: ...


class CursorLike(Protocol):
    def execute(self, sql: str, args: tuple[Any, ...]) -> object: ...
    def fetchone(self) -> tuple[Any, ...] | None: ...


class PushWorkerModule:
    @staticmethod
    def parse_config(config: Mapping[str, Any] | None) -> ModuleConfig:
        return parse_module_config(config)

    def __init__(self, config: ModuleConfig, api: ModuleApiLike) -> None:
        self._config = config
        self._api = api
        self._server_name = api.server_name
        self._reactor = cast(ReactorLike, importlib.import_module("twisted.internet.reactor"))
        settings = PipelineSettings(
            max_pending_bytes=config.max_pending_bytes,
            max_pending_account_calls=config.max_pending_account_calls,
            max_age_seconds=config.max_age_ms / 1000,
            timeout_seconds=config.timeout_seconds,
        )
        self.pipeline = PushPipeline(settings, self._client, checks=self._checks, logger=logger)
        self._handles_events = (api.worker_name or "master") == config.instance_name
        api.register_third_party_rules_callbacks(
            on_new_event=self.on_new_event if self._handles_events else None,
            on_user_deactivation_status_changed=self.on_user_deactivation_status_changed,
        )
        try:
            api.register_password_auth_provider_callbacks(on_logged_out=self.on_logged_out)
        except Exception as error:
            # Synapse refuses these callbacks when it delegates authentication (OAuth, MAS): logouts
            # happen there, out of the module's reach.
            logger.warning("logouts will not remove pushers from the pool: %s", error)
        self._reactor.addSystemEventTrigger("before", "shutdown", self.pipeline.close, 2.0)
        _register_metrics(self.pipeline)
        logger.info(
            "matrix-push-worker module loaded; %s",
            "it pushes events from this process"
            if self._handles_events
            else f"events are pushed from the process {config.instance_name!r}, not this one",
        )

    # ---- Synapse's callbacks (in Synapse's thread) -------------------------------

    async def on_new_event(self, event: EventLike, state_events: StateMap) -> None:
        try:
            plan = plan_event(
                event, state_events, self._server_name, include_content=self._config.include_content
            )
            if not isinstance(plan, Skipped):
                self.pipeline.submit_event(plan)
        except Exception:
            self.pipeline.counters.add("events_failed")
            logger.exception("cannot hand event %s to the push pool", getattr(event, "event_id", "?"))

    async def on_logged_out(self, user_id: str, device_id: str | None, access_token: str) -> None:
        # A token with no device had no pusher of its own (the pool keys pushers by device).
        if device_id is not None:
            self._account(AccountCall("delete_pushers", user_id, device_id))

    async def on_user_deactivation_status_changed(
        self, user_id: str, deactivated: bool, by_admin: bool
    ) -> None:
        if deactivated:
            self._account(AccountCall("delete_user_data", user_id))

    def _account(self, call: AccountCall) -> None:
        try:
            self.pipeline.submit_account(call)
        except Exception:
            self.pipeline.counters.add("account_calls_failed")
            logger.exception("cannot hand %s for %s to the push pool", call.kind, call.user_id)

    # ---- for the module's thread -------------------------------------------------

    def _client(self) -> PushRulesClient:
        config = self._config
        return PushRulesClient(
            url=config.amqp_url,
            publisher_user_id=config.publisher_user_id,
            queue=config.queue,
            read_queue=None,
            evaluate_queue=config.evaluate_queue,
            deliver_queue=config.deliver_queue,
            timeout=config.timeout_seconds,
            logger=logger,
        )

    async def _checks(self, questions: list[tuple[Checks, frozenset[str]]]) -> list[frozenset[str]]:
        """Runs `_answer` in Synapse's thread (its module API is for that thread only)."""
        future: concurrent.futures.Future[list[frozenset[str]]] = concurrent.futures.Future()
        self._reactor.callFromThread(self._start_answer, questions, future)
        return await asyncio.wrap_future(future)

    def _start_answer(
        self,
        questions: list[tuple[Checks, frozenset[str]]],
        future: concurrent.futures.Future[list[frozenset[str]]],
    ) -> None:
        self._api.run_as_background_process("matrix_push_worker_checks", self._answer, questions, future)

    async def _answer(
        self,
        questions: list[tuple[Checks, frozenset[str]]],
        future: concurrent.futures.Future[list[frozenset[str]]],
    ) -> None:
        try:
            future.set_result([await self._allowed(checks, users) for checks, users in questions])
        except Exception as error:
            if not future.done():
                future.set_exception(error)

    async def _allowed(self, checks: Checks, users: frozenset[str]) -> frozenset[str]:
        allowed = set(users)
        account_data = self._api.account_data_manager
        if checks.ignored_sender is not None:
            for user in sorted(allowed):
                if ignores(await account_data.get_global(user, IGNORED_USER_LIST), checks.ignored_sender):
                    allowed.discard(user)
        invitee = checks.invitee
        if invitee is not None and invitee in allowed:
            blocks = invites_blocked(await account_data.get_global(invitee, INVITE_PERMISSION_CONFIG))
            if blocks:
                allowed.discard(invitee)
        joined_before = checks.joined_before
        if joined_before is not None and joined_before.target in allowed:
            previous = None
            if joined_before.previous_event_id is not None:
                previous = await self._api.run_db_interaction(
                    "matrix_push_worker_previous_membership", _membership_of, joined_before.previous_event_id
                )
            if previous != "join":
                allowed.discard(joined_before.target)
        return frozenset(allowed)


def _membership_of(txn: CursorLike, event_id: str) -> str | None:
    """The membership a membership event set (Synapse's `room_memberships` table)."""
    txn.execute("SELECT membership FROM room_memberships WHERE event_id = ?", (event_id,))
    row = txn.fetchone()
    return None if row is None else str(row[0])


def _register_metrics(pipeline: PushPipeline) -> None:
    """The pipeline's counters and lines on Synapse's metrics listener (prometheus_client's default
    registry, which Synapse serves), when prometheus_client is there."""
    try:
        prometheus = importlib.import_module("prometheus_client")
        core = importlib.import_module("prometheus_client.core")
    except ImportError:
        return

    class Collector:
        def collect(self) -> Iterator[object]:
            counts = pipeline.counters.snapshot()
            for name in COUNTERS:
                yield core.CounterMetricFamily(
                    f"matrix_push_worker_module_{name}",
                    f"matrix-push-worker module: {name}",
                    value=counts[name],
                )
            lines = {
                "pending_events": len(pipeline.events),
                "pending_event_bytes": pipeline.events.size,
                "pending_account_calls": len(pipeline.account_calls),
            }
            for name, value in lines.items():
                yield core.GaugeMetricFamily(
                    f"matrix_push_worker_module_{name}", f"matrix-push-worker module: {name}", value=value
                )

    try:
        prometheus.REGISTRY.register(Collector())
    except ValueError:  # already registered by an earlier instance in this process
        logger.info("the module's metrics are registered already")

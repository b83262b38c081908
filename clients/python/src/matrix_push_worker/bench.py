"""The Python client's closed-loop driver for `npm run bench -- --only clients` (issue 41).

`python -m matrix_push_worker.bench` reads one JSON object on stdin, the workload every client's
driver is given:

    {"op": "get_pushrules" | "evaluate", "concurrency": 64, "warmup_seconds": 1, "measure_seconds": 3,
     "users": ["@a:b", ...], "events": [<event>, ...], "room": <room>, "recipients": [<recipient>, ...]}

and runs `concurrency` callers, each sending its next call of `PushRulesClient`'s typed method
(`get_push_rules`, or `evaluate` of one of `events` to `recipients`) as soon as the last one is
answered. Caller `lane`'s `i`th call names `users[lane + concurrency * (i % (len(users) //
concurrency))]` (each caller its own users, as bench/support/workloads.ts's `UserPool.pick`) or
`events[(lane + i * concurrency) % len(events)]`. A call counts when it both starts and ends in the
measured window. Prints one line on stdout: `{"latencies_ms": [...], "errors": n, "first_error":
text | null, "cpu_seconds": s}`, the round trips as the caller saw them and the CPU time the process
used in the measured window. Settings: `AMQP_URL`, `PUBLISHER_USER_ID`,
and the workers' `RPC_QUEUE`, `RPC_READ_QUEUE`, `EVALUATE_QUEUE`; `BENCH_PYTHON_PROFILE`, a folder:
cProfile the measured window into `<folder>/<op>-c<concurrency>.prof` (slows the calls: a run of
its own, not one whose figures are read).
"""

from __future__ import annotations

import asyncio
import cProfile
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any, cast

from .client import PushRulesClient
from .wire_types import EvaluationEvent, EvaluationRecipient, EvaluationRoom


class Workload:
    def __init__(self, spec: dict[str, Any]) -> None:
        self.op = cast(str, spec["op"])
        if self.op not in ("get_pushrules", "evaluate"):
            raise ValueError(f"unknown op {self.op!r}: get_pushrules or evaluate")
        self.concurrency = int(spec["concurrency"])
        self.warmup = float(spec["warmup_seconds"])
        self.measure = float(spec["measure_seconds"])
        self.users = cast(list[str], spec.get("users", []))
        self.events = cast(list[EvaluationEvent], spec.get("events", []))
        self.room = cast(EvaluationRoom, spec.get("room", {}))
        self.recipients = cast(list[EvaluationRecipient], spec.get("recipients", []))
        if self.op == "get_pushrules" and len(self.users) < self.concurrency:
            raise ValueError("get_pushrules needs at least as many users as callers")
        if self.op == "evaluate" and not self.events:
            raise ValueError("evaluate needs events")


def _call(client: PushRulesClient, work: Workload) -> Callable[[int, int], Awaitable[object]]:
    if work.op == "get_pushrules":
        per_lane = len(work.users) // work.concurrency

        def read(lane: int, i: int) -> Awaitable[object]:
            return client.get_push_rules(work.users[lane + work.concurrency * (i % per_lane)])

        return read

    def evaluate(lane: int, i: int) -> Awaitable[object]:
        event = work.events[(lane + i * work.concurrency) % len(work.events)]
        return client.evaluate(event, work.room, work.recipients)

    return evaluate


async def run(client: PushRulesClient, work: Workload) -> dict[str, Any]:
    call = _call(client, work)
    latencies: list[float] = []
    errors = 0
    first_error: str | None = None
    started = time.perf_counter()
    measure_from = started + work.warmup
    measure_to = measure_from + work.measure

    async def lane(index: int) -> None:
        nonlocal errors, first_error
        i = 0
        while True:
            begin = time.perf_counter()
            if begin >= measure_to:
                return
            failed = False
            try:
                await call(index, i)
            except Exception as error:
                failed = True
                if begin >= measure_from and first_error is None:
                    first_error = f"{type(error).__name__}: {error}"
            end = time.perf_counter()
            i += 1
            if begin < measure_from or end > measure_to:
                continue
            if failed:
                errors += 1
            else:
                latencies.append((end - begin) * 1000)

    profile_folder = os.environ.get("BENCH_PYTHON_PROFILE")
    profiler = cProfile.Profile() if profile_folder else None

    async def cpu_in_window() -> float:
        await asyncio.sleep(max(0.0, measure_from - time.perf_counter()))
        cpu_from = time.process_time()
        if profiler is not None:
            profiler.enable()
        await asyncio.sleep(max(0.0, measure_to - time.perf_counter()))
        if profiler is not None:
            profiler.disable()
            profiler.dump_stats(
                os.path.join(cast(str, profile_folder), f"{work.op}-c{work.concurrency}.prof")
            )
        return time.process_time() - cpu_from

    cpu = asyncio.create_task(cpu_in_window())
    await asyncio.gather(*(lane(index) for index in range(work.concurrency)))
    return {"latencies_ms": latencies, "errors": errors, "first_error": first_error, "cpu_seconds": await cpu}


async def _main() -> int:
    url = os.environ.get("AMQP_URL")
    if not url:
        print("bench: AMQP_URL is not set", file=sys.stderr)
        return 2
    work = Workload(json.loads(sys.stdin.read()))
    client = PushRulesClient(
        url,
        os.environ.get("PUBLISHER_USER_ID") or None,
        queue=os.environ.get("RPC_QUEUE") or "matrix.push.rpc",
        read_queue=os.environ.get("RPC_READ_QUEUE") or "matrix.push.read",
        evaluate_queue=os.environ.get("EVALUATE_QUEUE") or "matrix.push.evaluate",
    )
    try:
        result = await run(client, work)
    finally:
        await client.close()
    print(json.dumps(result, separators=(",", ":")))
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(_main()))

"""What the Synapse module holds for the pool: events and account calls waiting, oldest first.

Synapse's thread adds, the module's thread takes, so every method holds a lock. Both lines are
bounded while the pool is away: events by their estimated bytes, account calls by their number;
taking one in past the bound drops the oldest waiting (never one being handed over), and one that
could never fit is dropped at once. Events also expire: one waiting longer than `max_age` is
dropped, as the workers drop a notification older than their `delivery.maxAgeMs`.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from .wire_types import NotifyRecipient

T = TypeVar("T")


@dataclass(eq=False)
class Pending(Generic[T]):
    item: T
    size: int
    since: float
    """When it was taken in, on the line's clock (seconds)."""
    in_flight: bool = False
    messages: list[tuple[str, list[NotifyRecipient]]] | None = None
    """An event's `notify` messages once evaluated, kept so that a retry publishes the same ones."""
    published: int = 0
    """How many of `messages` the broker has confirmed."""


@dataclass(frozen=True)
class Dropped(Generic[T]):
    item: T
    reason: str
    """`full` (the line's bound), `too-large` (past the bound alone) or `expired`."""


class PendingLine(Generic[T]):
    def __init__(self, *, max_size: int, max_age: float | None, clock: Callable[[], float]) -> None:
        self._max_size = max_size
        self._max_age = max_age
        self._clock = clock
        self._entries: deque[Pending[T]] = deque()
        self._size = 0
        self._lock = threading.Lock()

    def add(self, item: T, size: int) -> list[Dropped[T]]:
        """Takes `item` in; returns what went to make room (or `item` itself when it cannot fit)."""
        with self._lock:
            if size > self._max_size:
                return [Dropped(item, "too-large")]
            dropped: list[Dropped[T]] = []
            while self._size + size > self._max_size:
                oldest = next((entry for entry in self._entries if not entry.in_flight), None)
                if oldest is None:
                    break
                self._remove(oldest)
                dropped.append(Dropped(oldest.item, "full"))
            if self._size + size > self._max_size:
                return [*dropped, Dropped(item, "full")]
            self._entries.append(Pending(item, size, self._clock()))
            self._size += size
            return dropped

    def take(self, fits: Callable[[list[Pending[T]], Pending[T]], bool]) -> list[Pending[T]]:
        """The oldest entries, as many as `fits(taken, next)` allows (at least one), marked in flight
        until `done` or `release`; nothing while some are in flight."""
        with self._lock:
            if any(entry.in_flight for entry in self._entries):
                return []
            taken: list[Pending[T]] = []
            for entry in self._entries:
                if taken and not fits(taken, entry):
                    break
                entry.in_flight = True
                taken.append(entry)
            return taken

    def done(self, entry: Pending[T]) -> None:
        with self._lock:
            if entry in self._entries:
                self._remove(entry)

    def release(self, entries: list[Pending[T]]) -> None:
        """Back to waiting, in their place (the pool did not take them)."""
        with self._lock:
            for entry in entries:
                entry.in_flight = False

    def release_all(self) -> None:
        """Every entry back to waiting (a round that failed unexpectedly)."""
        with self._lock:
            for entry in self._entries:
                entry.in_flight = False

    def expire(self) -> list[Dropped[T]]:
        """Drops the waiting entries older than `max_age`."""
        if self._max_age is None:
            return []
        with self._lock:
            limit = self._clock() - self._max_age
            old = [entry for entry in self._entries if entry.since < limit and not entry.in_flight]
            for entry in old:
                self._remove(entry)
            return [Dropped(entry.item, "expired") for entry in old]

    def age_of(self, entry: Pending[T]) -> float:
        return self._clock() - entry.since

    @property
    def size(self) -> int:
        return self._size

    def __len__(self) -> int:
        return len(self._entries)

    def _remove(self, entry: Pending[T]) -> None:
        self._entries.remove(entry)
        self._size -= entry.size

"""The Synapse module's lines of work for the pool: bounded, oldest first, events expiring."""

from __future__ import annotations

from dataclasses import dataclass

from matrix_push_worker.pending_pushes import Dropped, Pending, PendingLine


@dataclass
class Clock:
    """Seconds, moved by the test."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now


def a_line(max_size: int = 10, max_age: float | None = 60.0, clock: Clock | None = None) -> PendingLine[str]:
    return PendingLine(max_size=max_size, max_age=max_age, clock=clock or Clock())


def everything(taken: list[Pending[str]], following: Pending[str]) -> bool:
    return True


def items(entries: list[Pending[str]]) -> list[str]:
    return [entry.item for entry in entries]


def test_past_its_bound_the_oldest_waiting_go_first() -> None:
    line = a_line(max_size=10)
    assert line.add("a", 4) == []
    assert line.add("b", 4) == []
    assert line.add("c", 4) == [Dropped("a", "full")]
    assert line.add("d", 8) == [Dropped("b", "full"), Dropped("c", "full")]
    assert (len(line), line.size) == (1, 8)
    assert items(line.take(everything)) == ["d"]


def test_what_is_being_handed_over_is_never_dropped() -> None:
    line = a_line(max_size=10)
    line.add("a", 6)
    assert items(line.take(everything)) == ["a"]
    assert line.add("b", 6) == [Dropped("b", "full")]
    assert line.add("c", 4) == []
    assert line.add("d", 3) == [Dropped("c", "full")]


def test_an_item_larger_than_the_bound_is_dropped_at_once() -> None:
    line = a_line(max_size=10)
    line.add("a", 2)
    assert line.add("huge", 11) == [Dropped("huge", "too-large")]
    assert items(line.take(everything)) == ["a"]


def test_take_hands_out_what_fits_at_least_one_and_nothing_more_while_some_are_out() -> None:
    line = a_line(max_size=100)
    for name in "abcde":
        line.add(name, 1)
    two = line.take(lambda taken, following: len(taken) < 2)
    assert items(two) == ["a", "b"]
    assert line.take(everything) == []
    line.done(two[0])
    line.release(two)
    assert items(line.take(lambda taken, following: False)) == ["b"]


def test_done_and_release() -> None:
    line = a_line(max_size=100)
    line.add("a", 5)
    line.add("b", 7)
    taken = line.take(everything)
    line.done(taken[0])
    assert (len(line), line.size) == (1, 7)
    line.release(taken)
    assert items(line.take(everything)) == ["b"]
    line.release_all()
    assert items(line.take(everything)) == ["b"]


def test_events_waiting_longer_than_their_age_expire_unless_being_handed_over() -> None:
    clock = Clock()
    line = a_line(max_size=100, max_age=60.0, clock=clock)
    line.add("old", 1)
    clock.now = 30.0
    line.add("newer", 1)
    clock.now = 61.0
    assert line.expire() == [Dropped("old", "expired")]
    taken = line.take(everything)
    clock.now = 200.0
    assert line.expire() == []
    line.release(taken)
    assert line.expire() == [Dropped("newer", "expired")]
    assert (len(line), line.size) == (0, 0)


def test_a_line_without_an_age_never_expires() -> None:
    clock = Clock()
    line = a_line(max_age=None, clock=clock)
    line.add("call", 1)
    clock.now = 1e9
    assert line.expire() == []
    assert len(line) == 1

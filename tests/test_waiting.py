"""tests.fixtures.waiting: a wait either sees what it waits for or fails the test, whatever it is given."""

from __future__ import annotations

import threading

import pytest

from tests.fixtures.waiting import WatchedCondition, wait_until


def test_a_predicate_that_holds_returns_true_at_once():
    looks = []
    assert wait_until(lambda: looks.append(1) or True, timeout=5) is True
    assert looks == [1]


def test_a_predicate_that_comes_to_hold_is_looked_at_until_it_does():
    looks = []
    assert wait_until(lambda: looks.append(1) or len(looks) == 3, timeout=5, interval=0.001)
    assert len(looks) == 3


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"what": "the answer"},
        {"what": lambda: "the answer"},
        {"interval": 0.001},
        {"tick": lambda: None},
        {"timeout": 0},
    ],
)
def test_a_timeout_fails_whatever_the_arguments(options):
    options = {"timeout": 0.05, "interval": 0.01, **options}
    with pytest.raises(AssertionError, match="timed out after"):
        wait_until(lambda: False, **options)


def test_a_timeout_says_what_was_awaited():
    with pytest.raises(AssertionError, match="waiting for the answer$"):
        wait_until(lambda: False, timeout=0.02, interval=0.01, what="the answer")
    state = {"at": 1}
    with pytest.raises(AssertionError, match="waiting for the state 2$"):
        wait_until(lambda: state.update(at=2), timeout=0.02, interval=0.01, what=lambda: f"the state {state['at']}")

    def nothing_done() -> bool:
        return False

    with pytest.raises(AssertionError, match="nothing_done to hold"):
        wait_until(nothing_done, timeout=0.02, interval=0.01)


def test_a_predicate_that_holds_at_the_deadline_counts():
    looks = []
    assert wait_until(lambda: looks.append(1) or len(looks) > 1, timeout=0.01, interval=0.05)
    assert len(looks) == 2  # once before the deadline, once after the sleep that passed it


def test_tick_runs_between_looks():
    ticks, looks = [], []
    wait_until(lambda: looks.append(1) or len(looks) == 3, timeout=5, interval=0.001, tick=lambda: ticks.append(1))
    assert len(ticks) == 2


def test_a_watched_condition_names_the_threads_that_waited_on_it():
    condition = WatchedCondition()
    go = threading.Event()

    def waiter():
        with condition:
            while not go.is_set():
                condition.wait(5)

    thread = threading.Thread(target=waiter)
    thread.start()
    wait_until(lambda: thread in condition.waited, timeout=5, interval=0.01)
    with condition:
        go.set()
        condition.notify_all()
    thread.join(5)
    assert not thread.is_alive() and condition.waited == {thread}

"""The backbone's slots go to waiting requests lowest key first, and a request that gives up
while waiting takes none with it."""

from __future__ import annotations

import threading
import time

import pytest

from memsys.llm.pool import Cancelled
from memsys.llm.slots import Key, Slots


def wait_until(condition: object, timeout_s: float = 5.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline
        time.sleep(0.005)


def test_a_freed_slot_goes_to_the_lowest_key_waiting() -> None:
    slots, order, never = Slots(1), [], threading.Event()
    hold = slots.held((), never)
    hold.__enter__()  # the only slot taken: everyone below waits

    def take(key: Key) -> None:
        with slots.held(key, never):
            order.append(key)

    keys: list[Key] = [(1, 0, 0), (0, 2, 5), (0, 1, 9), (0, 1, 3)]
    threads = [threading.Thread(target=take, args=(key,)) for key in keys]
    for thread in threads:
        thread.start()
    wait_until(lambda: len(slots._waiting) == len(keys))
    hold.__exit__(None, None, None)
    for thread in threads:
        thread.join()
    assert order == sorted(keys)


def test_a_request_that_gives_up_waiting_leaves_the_slots_as_they_were() -> None:
    slots, never, given_up = Slots(1), threading.Event(), threading.Event()
    with slots.held((), never):
        given_up.set()
        with pytest.raises(Cancelled), slots.held((0,), given_up):
            pass
    with slots.held((), never):  # the slot came back: this does not wait
        pass
    assert slots._in_flight == 0 and not slots._waiting

"""The serving process's garbage collector, set once the app has started (``confer serve``).

Python's cyclic collector stops the event loop while it runs, and a full collection walks every
tracked object of the process: the modules, models, routes and schemas loaded at start-up, some
130,000 objects that live as long as the process. On a loaded server one such walk every few
thousand requests took 90–300 ms (collecting nothing), the largest part of a send's p99
(docs/benchmarks.md, "Where the p99 came from"). :func:`settle` therefore, once start-up is
over:

- collects once, then moves every object alive at that point into the permanent generation
  (:func:`gc.freeze`): later collections never walk them again, and the full collections that
  still happen walk only what was made since (a few ms);
- raises the youngest generation's threshold from 700 to :data:`YOUNG_THRESHOLD` allocations:
  a request in flight holds a few hundred objects, so at 700 a young collection ran every few
  requests, promoting what requests in flight held into older generations, whose collections
  then walked it again. Objects are freed by reference counting as before; only cycles wait
  for a collection, and at most that many container allocations pile up before one.

It is called by :func:`gateway.cli.run_server` only: a process that builds many apps (the test
suite) must not freeze each one, since a frozen cycle is never collected.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 5_000
"""Allocations (net of deallocations) of tracked objects between two young collections."""


def settle() -> None:
    """Collect, freeze what is alive, and raise the young generation's threshold."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, middle, old)

"""Run callables at the same moment on separate threads (races on the database)."""

from __future__ import annotations

import threading

from django.db import connections


def in_threads(*targets):
    """Run ``targets`` at the same moment on separate threads; return results or exceptions."""
    barrier = threading.Barrier(len(targets))
    results: list[object] = [None] * len(targets)

    def wrap(index, target):
        try:
            barrier.wait(timeout=10)
            results[index] = target()
        except BaseException as error:
            results[index] = error
        finally:
            connections.close_all()

    workers = [
        threading.Thread(target=wrap, args=(i, t)) for i, t in enumerate(targets)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=60)
    return results

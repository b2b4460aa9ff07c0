"""The flag an agent's long-poll sync waits on: set from any thread, awaited without one.

The hub's scheduler, cancel and stop paths run in worker threads and ``set`` a cluster's
flag when its work changed. A long-polling sync awaits it on the event loop
(``wait_async``), so a thousand idle agents hold a thousand futures, not a thousand
threads: the server's thread pool (40 threads) stays free for requests that compute.
``wait`` is the same from a thread, for callers outside the event loop.
"""

from __future__ import annotations

import asyncio
import threading

__all__ = ["Wakeup"]


class Wakeup:
    """One cluster's flag (``threading.Event``'s semantics, plus an awaitable wait)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._set = False
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def set(self) -> None:
        with self._cond:
            self._set = True
            waiters, self._waiters = self._waiters, []
            self._cond.notify_all()
        for loop, fut in waiters:
            loop.call_soon_threadsafe(_resolve, fut)

    def clear(self) -> None:
        with self._cond:
            self._set = False

    def is_set(self) -> bool:
        return self._set

    def wait(self, timeout: float) -> bool:
        """Block this thread until set or ``timeout`` seconds; whether it is set."""
        with self._cond:
            return self._cond.wait_for(lambda: self._set, timeout)

    async def wait_async(self, timeout: float) -> bool:
        """Await (no thread held) until set or ``timeout`` seconds; whether it is set."""
        loop = asyncio.get_running_loop()
        with self._cond:
            if self._set:
                return True
            fut: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, fut))
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass
        finally:  # timed out or the client went away: forget this waiter
            with self._cond:
                if (loop, fut) in self._waiters:
                    self._waiters.remove((loop, fut))
        return self._set


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)

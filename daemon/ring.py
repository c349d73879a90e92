"""A bounded single-producer single-consumer ring of CSV v2 frames (as fr3_stack's recording manager keeps one; docs/daemon.md).

The producer (the 1 kHz loop) and the consumer (the writer thread) share a preallocated
(slots, 80) float64 array. The producer fills a slot and only then advances `head`; the
consumer copies everything up to `head` and then advances `tail`, so neither ever waits on
the other. A full ring (slots − 1 frames queued) rejects the frame and counts it in `dropped`.
"""

from __future__ import annotations

import numpy as np

from .csv_v2 import FRAME_WIDTH

DEFAULT_SLOTS = 16384  # holds 16383 frames, ~16 s of backlog at 1 kHz


class FrameRing:
    """SPSC ring of 80-value frames; `push` from one thread, `pop_batch` from another."""

    def __init__(self, slots: int = DEFAULT_SLOTS) -> None:
        if slots < 2:
            raise ValueError(f"ring slots: expected >= 2, got {slots}")
        self.slots = int(slots)
        self._buf = np.zeros((self.slots, FRAME_WIDTH), dtype=np.float64)
        self._head = 0  # frames pushed (producer-owned)
        self._tail = 0  # frames popped (consumer-owned)
        self.dropped = 0

    @property
    def capacity(self) -> int:
        """Frames the ring holds at most (slots − 1)."""
        return self.slots - 1

    def reset(self) -> None:
        """Empty the ring and zero `dropped`; only while neither side is active."""
        self._head = 0
        self._tail = 0
        self.dropped = 0

    def __len__(self) -> int:
        return self._head - self._tail

    def push(self, frame: np.ndarray) -> bool:
        """Queue one 80-value frame; False (and `dropped += 1`) when the ring is full."""
        head = self._head
        if head - self._tail >= self.slots - 1:
            self.dropped += 1
            return False
        self._buf[head % self.slots] = frame
        self._head = head + 1
        return True

    def pop_batch(self, max_rows: int) -> np.ndarray:
        """Copy out up to `max_rows` queued frames (oldest first) as an (n, 80) array."""
        tail = self._tail
        n = min(self._head - tail, max_rows)
        if n <= 0:
            return np.empty((0, FRAME_WIDTH), dtype=np.float64)
        start = tail % self.slots
        stop = start + n
        if stop <= self.slots:
            out = self._buf[start:stop].copy()
        else:
            out = np.concatenate([self._buf[start:], self._buf[: stop - self.slots]])
        self._tail = tail + n
        return out

"""The recording writer thread: drains the frame ring into a CSV v2 file (fr3_stack's RingLogWriter; docs/daemon.md).

`RingLogWriter` opens the path exclusively (an existing file is refused, never truncated),
writes and flushes the header, then drains the ring in batches of up to 512 rows every 2 ms.
Rows are written with unbuffered `os.write`, so a batch counts as `written` once the kernel
accepted all of it (our flush); the first I/O failure latches `ok = False`, keeps its
operation name and errno, and every later frame is drained into `discarded`.
"""

from __future__ import annotations

import errno
import os
import sys
import threading
import time

from .csv_v2 import HEADER, format_rows
from .ring import FrameRing

BATCH_ROWS = 512
FORMAT_CHUNK_ROWS = 8  # rows per formatting call: keeps each GIL hold short for the 1 kHz loop
DRAIN_SLEEP_S = 0.002


class RingLogWriter:
    """Writer thread for one recording. `start()` returns at once; poll `ok`/`error`."""

    def __init__(self, path: str, ring: FrameRing, *, format_chunk_rows: int = FORMAT_CHUNK_ROWS) -> None:
        self.path = path
        self.ring = ring
        self.format_chunk_rows = max(1, int(format_chunk_rows))
        self.ok = False
        self.finished = False
        self.written = 0
        self.discarded = 0
        self.error_op = "none"
        self.error_code = 0
        self._fd: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ring-log-writer", daemon=True)

    # ---- status ---------------------------------------------------------------------------
    @property
    def error(self) -> str:
        """`"recording I/O failure: <op>"` after the first failure, else empty."""
        return "" if self.error_op == "none" else f"recording I/O failure: {self.error_op}"

    @property
    def failed(self) -> bool:
        return self.error_op != "none"

    @property
    def dropped(self) -> int:
        return self.ring.dropped

    @property
    def complete(self) -> bool:
        """finished and healthy I/O and no ring drops: certifies I/O only."""
        return self.finished and self.ok and self.ring.dropped == 0

    # ---- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Drain everything still queued, final flush, close and join."""
        self._stop.set()
        self._thread.join()

    def _fail(self, op: str, exc: BaseException | None) -> None:
        if self.failed:
            return
        code = getattr(exc, "errno", None) or errno.EIO
        self.error_op, self.error_code, self.ok = op, int(code), False
        reason = os.strerror(code)
        print(f"[ring-log] ERROR: {op} '{self.path}': {reason}; recording INVALID", file=sys.stderr)

    def _write_all(self, data: bytes, op: str) -> bool:
        view = memoryview(data)
        try:
            while view:
                n = os.write(self._fd, view)
                if n <= 0:
                    raise OSError(errno.EIO, "short write")
                view = view[n:]
        except OSError as exc:
            self._fail(op, exc)
            return False
        return True

    def _run(self) -> None:
        try:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            self._fail("open", exc)
            self.finished = True
            return
        if self._write_all(HEADER.encode(), "header write"):
            self.ok = True
        while True:
            stopping = self._stop.is_set()
            drained = self._drain_once()
            if stopping and not drained:
                break
            if not drained:
                time.sleep(DRAIN_SLEEP_S)
        self._close()

    def _drain_once(self) -> int:
        rows = self.ring.pop_batch(BATCH_ROWS)
        n = rows.shape[0]
        if n == 0:
            return 0
        if self.failed:
            self.discarded += n
            return n
        step = self.format_chunk_rows
        text = "".join(format_rows(rows[i:i + step]) for i in range(0, n, step))
        if self._write_all(text.encode(), "row write"):
            self.written += n
        else:
            self.discarded += n
        return n

    def _close(self) -> None:
        try:
            os.close(self._fd)
        except OSError as exc:
            self._fail("close", exc)
        self._fd = None
        self.finished = True
        verdict = "I/O complete" if self.complete else "INVALID recording"
        print(f"[ring-log] {verdict}: flushed={self.written} discarded={self.discarded} "
              f"dropped={self.ring.dropped} path='{self.path}'", file=sys.stderr)

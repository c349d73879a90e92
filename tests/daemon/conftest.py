"""Fixtures for the daemon tests: a real recording service on 127.0.0.1 fed by a 1 kHz producer."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from twinlake.daemon import csv_v2
from twinlake.daemon.client import Fr3Client
from twinlake.daemon.server import DaemonConfig, Fr3Daemon
from twinlake.daemon.recording import RecordingManager
from twinlake.daemon.service import RecordingService


class SyntheticProducer:
    """Feeds the manager one frame per ms, like fr3_stack's test harness (q0 = tick)."""

    def __init__(self, manager: RecordingManager) -> None:
        self.manager = manager
        self.tick = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        frame = csv_v2.empty_frames(1)[0]
        next_t = time.perf_counter()
        while not self._stop.is_set():
            if self.manager.enabled:
                frame[csv_v2.Q.start] = self.tick
                frame[csv_v2.ROBOT_TIME_S] = self.tick * 0.001
                frame[csv_v2.CONTROL_PERIOD_S] = 0.001
                frame[csv_v2.JOINT_TARGET_VALID] = 1
                frame[csv_v2.CONTROLLER] = 2
                self.manager.capture(frame, time.perf_counter())
            self.tick += 1
            next_t += 0.001
            time.sleep(max(0.0, next_t - time.perf_counter()))

    def start(self) -> "SyntheticProducer":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def service():
    """(manager, address) of a live recording service with a running 1 kHz producer."""
    manager = RecordingManager()
    svc = RecordingService(manager, "tcp://127.0.0.1:0").start()
    producer = SyntheticProducer(manager).start()
    try:
        yield manager, f"tcp://127.0.0.1:{svc.port}", svc.port
    finally:
        producer.stop()
        manager.shutdown()
        svc.stop()


def _read_csv(path) -> tuple[list[str], np.ndarray]:
    with open(path) as fh:
        header = fh.readline().rstrip("\n").split(",")
        rows = np.loadtxt(fh, delimiter=",", ndmin=2)
    return header, rows


@pytest.fixture
def read_csv():
    """A function: path -> (header names, (n, 80) float rows) of a CSV v2 file."""
    return _read_csv


class RunningDaemon:
    def __init__(self, **kwargs) -> None:
        cfg = DaemonConfig(cmd_port=0, state_port=0, recording_port=0, **kwargs)
        self.daemon = Fr3Daemon(cfg)
        self.exit_code = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        p = self.daemon.ports
        self.client = Fr3Client("127.0.0.1", p["cmd"], p["state"], recording_port=p["recording"])

    def _run(self) -> None:
        self.exit_code = self.daemon.run()

    def wait_state(self, predicate, timeout: float = 5.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = self.client.state(timeout=0.5)
            if st is not None and predicate(st):
                return st
            time.sleep(0.01)
        raise AssertionError(f"state never satisfied the condition; last {st}")

    def finish(self) -> int:
        self.client.terminate()
        self.thread.join(timeout=10)
        self.client.close()
        assert not self.thread.is_alive(), "daemon did not stop on termination"
        return self.exit_code


@pytest.fixture
def start_daemon():
    """A function starting a real daemon on ephemeral 127.0.0.1 ports (stopped at teardown)."""
    started = []

    def start(**kwargs) -> RunningDaemon:
        d = RunningDaemon(**kwargs)
        started.append(d)
        return d

    yield start
    for d in started:
        if d.thread.is_alive():
            d.daemon.stop()
            d.thread.join(timeout=10)
        d.client.close()

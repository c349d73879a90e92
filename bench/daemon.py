"""Benchmark the sim daemon in real time and the offline recorder (plain script, not a test).

    python bench/daemon.py [--seconds 60] [--offline-only]

1. Starts `twinlake daemon serve` logic in a separate process on ephemeral ports, records a
   joint-impedance multisine run of `--seconds` streamed at 60 Hz, and prints dropped frames,
   wall-clock period (`t_s` step) percentiles (target p99 <= 1.5 ms) and the state publish rate measured
   by a non-conflated subscriber (target 190-200 Hz), each as a ratio to its target.
2. Runs the offline recorder on a 9 s reference once cold (the first run in a process pays
   numba's one-time start-up, ~0.5 s; printed apart), then three times, each after timing the
   physics alone (mj_step1 + mj_step2 per tick, the peer), and prints the median wall and CPU
   µs per tick (all threads, and the main thread's share), × real time (target >= 100x, i.e. <= 10 µs per tick) and the ratio to physics
   alone, in wall time and in CPU time (the CPU ratio is the one a loaded host does not blur).
3. Formats 20000 CSV v2 rows with the compiled formatter (what the offline recorder uses), with
   our Python batch formatter (the daemon's writer) and with numpy.savetxt (the peer), checks
   that all three agree and prints the speed ratios.
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from twinlake.daemon import csv_v2 as C
from twinlake.daemon.client import Fr3Client
from twinlake.daemon.excitation import Plan, offsets
from twinlake.daemon.offline import record_offline
from twinlake.synthetic import SyntheticRun, write_reference

DAEMON_SNIPPET = """
import sys
from twinlake.daemon.server import DaemonConfig, Fr3Daemon
d = Fr3Daemon(DaemonConfig(cmd_port=0, state_port=0, recording_port=0, initial_controller="joint_impedance",
                           rt_priority=int(sys.argv[1])))
print(d.ports["cmd"], d.ports["state"], d.ports["recording"], flush=True)
sys.exit(d.run())
"""


COUNTER_SNIPPET = """
import os, sys, time, zmq
if int(sys.argv[3]) > 0:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(int(sys.argv[3])))
sub = zmq.Context.instance().socket(zmq.SUB)
sub.setsockopt(zmq.SUBSCRIBE, b"")
sub.connect("tcp://127.0.0.1:" + sys.argv[1])
end = time.monotonic() + float(sys.argv[2])
stamps = []
while time.monotonic() < end:
    if sub.poll(100):
        sub.recv()
        stamps.append(time.monotonic())
print(" ".join(repr(t) for t in stamps))
"""


def realtime_run(seconds: float, workdir: Path, rt_priority: int) -> dict:
    proc = subprocess.Popen([sys.executable, "-c", DAEMON_SNIPPET, str(rt_priority)], stdout=subprocess.PIPE,
                            text=True)
    cmd_port, state_port, rec_port = map(int, proc.stdout.readline().split())
    client = Fr3Client("127.0.0.1", cmd_port, state_port, recording_port=rec_port)
    # a separate process counts state messages, so the bench's own GIL does not drop any
    counter = subprocess.Popen([sys.executable, "-c", COUNTER_SNIPPET, str(state_port), str(seconds + 2),
                                str(rt_priority)],
                               stdout=subprocess.PIPE, text=True)
    while client.state(timeout=1.0) is None:
        pass
    anchor = client.state().q.copy()
    plan = Plan(mode="multisine", joints=tuple(range(1, 8)), seconds=seconds, ramp=min(5.0, seconds / 4),
                hold=0.0, amplitude_deg=1.0)
    csv = workdir / "realtime.csv"
    client.start_recording(str(csv), recording_id="bench")
    t0 = time.monotonic()
    while (now := time.monotonic() - t0) < seconds:
        client.send_joint_impedance(anchor + offsets(plan, np.array([now]))[0, 0])
        time.sleep(1 / 60)
    status = client.stop_recording("bench")
    stamps = [float(x) for x in counter.communicate(timeout=60)[0].split()]
    client.terminate()
    exit_code = proc.wait(timeout=30)
    client.close()
    # the loop's wall-clock periods are the steps of t_s (host time at capture);
    # control_period_s is the robot clock's period, 1 ms on every tick of the sim
    rows = np.loadtxt(csv, delimiter=",", skiprows=1, usecols=(0, C.T_S.start))
    periods = np.diff(rows[:, 1])
    window = np.array(stamps)
    window = window[(window > t0 + 1) & (window < t0 + seconds - 1)]
    state_hz = (len(window) - 1) / (window[-1] - window[0]) if len(window) > 1 else 0.0
    p50, p99, pmax = np.percentile(periods, [50, 99, 100]) * 1000
    return {"seconds": seconds, "rows": int(status.written), "complete": status.complete,
            "dropped": int(status.dropped), "seq_contiguous": bool(np.all(np.diff(rows[:, 0]) == 1)),
            "period_ms_p50": round(p50, 4), "period_ms_p99": round(p99, 4), "period_ms_max": round(pmax, 3),
            "mean_rate_hz": round(len(periods) / periods.sum(), 1), "state_hz": round(state_hz, 1),
            "daemon_exit": exit_code}


def mujoco_floor_us(ticks: int = 5000) -> tuple[float, float]:
    """Wall and CPU µs per tick of the physics alone (mj_step1 + mj_step2 of our FR3 model): the peer."""
    import mujoco

    from twinlake.sim import HOME_Q, load_model

    model = load_model()
    data = mujoco.MjData(model)
    data.qpos[:7] = HOME_Q
    data.qfrc_applied[:7] = 0.5
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(ticks):
        mujoco.mj_step1(model, data)
        mujoco.mj_step2(model, data)
    return (time.perf_counter() - start) / ticks * 1e6, (time.process_time() - cpu) / ticks * 1e6


def offline_run(workdir: Path, seconds: float = 9.0, repeat: int = 3) -> dict:
    """Offline recorder on a `seconds` multisine reference, `repeat` times, each interleaved with
    the MuJoCo-only floor; medians of wall µs per tick, main-process CPU µs per tick and × real time."""
    plan = Plan(mode="multisine", joints=tuple(range(1, 8)), seconds=seconds, ramp=2.0, hold=0.5)
    reference = write_reference(SyntheticRun("offline", plan, tail_s=0.0), workdir / "reference.csv")
    wall, cpu, main_cpu, speed, floor, floor_cpu = [], [], [], [], [], []
    cold_start = time.perf_counter()  # the whole first call: model, numba start-up, simulation, files
    cold = record_offline(reference, workdir / "offline-cold.csv", tail_s=0.0)
    cold_speedup = cold.sim_seconds / (time.perf_counter() - cold_start)
    for i in range(repeat):
        floor_wall_us, floor_cpu_us = mujoco_floor_us()
        floor.append(floor_wall_us)
        floor_cpu.append(floor_cpu_us)
        cpu0, main0 = time.process_time(), time.thread_time()
        res = record_offline(reference, workdir / f"offline{i}.csv", tail_s=0.0)
        cpu.append((time.process_time() - cpu0) / res.rows * 1e6)
        main_cpu.append((time.thread_time() - main0) / res.rows * 1e6)
        wall.append(res.wall_seconds / res.rows * 1e6)
        speed.append(res.speedup)
    med = statistics.median
    return {"sim_seconds": res.sim_seconds, "repeat": repeat, "wall_us_per_tick": round(med(wall), 1),
            "cpu_us_per_tick": round(med(cpu), 1), "main_thread_cpu_us_per_tick": round(med(main_cpu), 1),
            "speedup_vs_realtime": round(med(speed), 2),
            "speedups": [round(x, 2) for x in speed], "cold_first_call_speedup": round(cold_speedup, 2),
            "mujoco_only_us_per_tick": round(med(floor), 1),
            "ratio_to_mujoco_only": round(med(wall) / med(floor), 2),
            "mujoco_only_cpu_us_per_tick": round(med(floor_cpu), 1),
            "cpu_ratio_to_mujoco_only": round(med(cpu) / med(floor_cpu), 2)}


def formatter_ratio() -> dict:
    rows = np.random.default_rng(0).normal(size=(20000, C.FRAME_WIDTH))
    rows[:, [C.COLUMNS.index(c) for c in C.INT_COLUMNS]] = 3
    C.format_rows_bytes(rows[:2])  # load the compiled formatter (numba's cache) first
    t = time.perf_counter()
    compiled = C.format_rows_bytes(rows)
    compiled_s = time.perf_counter() - t
    t = time.perf_counter()
    ours = C.format_rows(rows)
    ours_s = time.perf_counter() - t
    buf = io.StringIO()
    fmt = [("%d" if c in C.INT_COLUMNS else "%.12g") for c in C.COLUMNS]
    t = time.perf_counter()
    np.savetxt(buf, rows, fmt=fmt, delimiter=",")
    peer_s = time.perf_counter() - t
    assert buf.getvalue() == ours, "formatter disagrees with numpy.savetxt"
    assert compiled == ours.encode(), "compiled formatter disagrees with format_rows"
    return {"rows": 20000, "compiled_s": round(compiled_s, 3), "ours_s": round(ours_s, 3), "savetxt_s": round(peer_s, 3),
            "speedup_vs_savetxt": round(peer_s / ours_s, 2), "compiled_speedup_vs_savetxt": round(peer_s / compiled_s, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rt-priority", type=int, default=0,
                        help="SCHED_FIFO priority for the daemon process (0 = normal, as in CI)")
    parser.add_argument("--offline-only", action="store_true", help="skip the real-time daemon run")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        rt = None
        if not args.offline_only:
            rt = realtime_run(args.seconds, work, args.rt_priority)
            print(f"realtime  {rt['seconds']:g} s, rt-priority {args.rt_priority}: rows {rt['rows']}, dropped {rt['dropped']}, complete {rt['complete']}, "
                  f"period p50/p99/max {rt['period_ms_p50']}/{rt['period_ms_p99']}/{rt['period_ms_max']} ms "
                  f"(p99 / 1.5 ms target = {rt['period_ms_p99'] / 1.5:.2f}), mean rate {rt['mean_rate_hz']} Hz, "
                  f"state {rt['state_hz']} Hz (ratio to 200 Hz = {rt['state_hz'] / 200:.3f})")
        off = offline_run(work)
        print(f"offline   {off['sim_seconds']:g} s simulated, median of {off['repeat']}: {off['wall_us_per_tick']} us/tick wall "
              f"({off['cpu_us_per_tick']} us CPU in the main process, {off['main_thread_cpu_us_per_tick']} of them in its main "
              f"thread; the rest formats and writes on the sink's thread), {off['speedup_vs_realtime']}x real time "
              f"(target 100x; runs {off['speedups']}; whole first call in a fresh process {off['cold_first_call_speedup']}x); physics alone {off['mujoco_only_us_per_tick']} us/tick, "
              f"ours / physics alone = {off['ratio_to_mujoco_only']}x wall, {off['cpu_ratio_to_mujoco_only']}x CPU "
              f"(physics alone {off['mujoco_only_cpu_us_per_tick']} us CPU/tick)")
        fm = formatter_ratio()
        print(f"formatter 20000 rows: compiled {fm['compiled_s']} s, python batch {fm['ours_s']} s, numpy.savetxt "
              f"{fm['savetxt_s']} s: {fm['compiled_speedup_vs_savetxt']}x and {fm['speedup_vs_savetxt']}x savetxt's speed")
        print(json.dumps({"realtime": rt, "offline": off, "formatter": fm}))


if __name__ == "__main__":
    main()

"""A two-node Ray cluster on this machine, started with `ray start` as docs/ray.md tells a
user to: a head (2 CPUs, dashboard and job server) and a second node (1 CPU), each with its
own temp directory and its own free ports on 127.0.0.1, each `ray start --block` process
kept as a child of the test process so that it, and only it, is ended by pid at the end
(never `ray stop`, which ends every Ray process of the machine's user).

`ray start --block` supervises the node's processes (GCS, raylet, dashboard, agents): ending
it with SIGTERM makes it end them; when one of them dies (the raylet killed by a test) it
ends the rest and exits.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

RAY = str(Path(sys.executable).with_name("ray"))
NODE_IP = "127.0.0.1"


def free_ports(n: int) -> list[int]:
    """`n` distinct ports free on 127.0.0.1 now (bound to port 0, then released)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket()
            s.bind((NODE_IP, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def cluster_env() -> dict[str, str]:
    """The environment of the nodes and of every client: this venv's `twinlake` and `ray` on
    PATH (a job's entrypoint runs in the head's environment), token authentication off (the
    nodes listen on 127.0.0.1 only and the test owns them) and no usage reporting."""
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(RAY_AUTH_MODE="disabled", RAY_USAGE_STATS_ENABLED="0", PYTHONUNBUFFERED="1")
    return env


@dataclass
class RayNode:
    """One `ray start --block` process and its node's temp directory."""

    proc: subprocess.Popen
    temp_dir: Path
    num_cpus: int
    log: Path

    def child_pid(self, name: str) -> int:
        """The pid of the node's process whose command line names `name` (e.g. "raylet")."""
        for pid in _children(self.proc.pid):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cmd and Path(cmd[0].decode()).name == name:
                return pid
        raise LookupError(f"no {name} process under ray start (pid {self.proc.pid})")

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM the `ray start` process (it ends its node's processes), SIGKILL if it hangs."""
        if self.proc.poll() is None:
            children = _descendants(self.proc.pid)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            for pid in children:  # anything it left behind, by pid
                _kill(pid)


@dataclass
class TwoNodeCluster:
    """The head and the second node; `address` is the GCS address (`--address`), `dashboard`
    the URL `ray job submit --address` and the state API take."""

    head: RayNode
    worker: RayNode
    address: str
    dashboard: str
    env: dict[str, str] = field(default_factory=cluster_env)

    def stop(self) -> None:
        self.worker.stop()
        self.head.stop()
        for node in (self.worker, self.head):
            shutil.rmtree(node.temp_dir, ignore_errors=True)


def _children(pid: int) -> list[int]:
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            out += [int(p) for p in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def _descendants(pid: int) -> list[int]:
    found, todo = [], _children(pid)
    while todo:
        p = todo.pop()
        found.append(p)
        todo += _children(p)
    return found


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _start(args: list[str], num_cpus: int, env: dict[str, str], ports: list[int]) -> RayNode:
    """`ray start --block` with its own temp dir (short: it holds unix sockets) and ports, run
    in a working directory of its own with its own `TMPDIR` (`<temp dir>/cwd`, `<temp dir>/tmp`):
    what its tasks write under the working or temporary directory is the node's alone, as on
    separate machines."""
    temp_dir = Path(tempfile.mkdtemp(prefix="tlray-"))
    for sub in ("cwd", "tmp"):
        (temp_dir / sub).mkdir()
    env = {**env, "TMPDIR": str(temp_dir / "tmp")}
    om, nm, agent_http, agent_grpc, runtime_env, metrics, lo = ports
    cmd = [RAY, "start", "--block", "--disable-usage-stats", f"--node-ip-address={NODE_IP}",
           f"--num-cpus={num_cpus}", "--num-gpus=0", f"--temp-dir={temp_dir}",
           f"--object-manager-port={om}", f"--node-manager-port={nm}",
           f"--dashboard-agent-listen-port={agent_http}", f"--dashboard-agent-grpc-port={agent_grpc}",
           f"--runtime-env-agent-port={runtime_env}", f"--metrics-export-port={metrics}",
           f"--min-worker-port={lo}", f"--max-worker-port={lo + 199}", *args]
    log = temp_dir / "ray-start.log"
    proc = subprocess.Popen(cmd, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, cwd=temp_dir / "cwd")
    return RayNode(proc, temp_dir, num_cpus, log)


def _worker_port_base() -> int:
    """A base of 200 worker ports: random in 20000..59000 (each node's workers bind there)."""
    import random

    return random.Random(os.getpid() ^ time.time_ns()).randrange(20000, 59000, 200)


def start_two_nodes(head_cpus: int = 2, worker_cpus: int = 1, timeout_s: float = 90.0,
                    attempts: int = 3, extra_env: dict[str, str] | None = None) -> TwoNodeCluster:
    """Start the head, wait for it, start the second node, wait until both are alive. A node
    that fails to start (Ray gives a raylet 30 s to register: an overloaded machine can miss
    it) is retried once from scratch, on new ports."""
    for attempt in range(1, attempts + 1):
        try:
            return _start_two_nodes(head_cpus, worker_cpus, timeout_s, extra_env or {})
        except (RuntimeError, TimeoutError):
            if attempt == attempts:
                raise
    raise AssertionError("unreachable")


def _start_two_nodes(head_cpus: int, worker_cpus: int, timeout_s: float, extra_env: dict[str, str]) -> TwoNodeCluster:
    env = {**cluster_env(), **extra_env}
    gcs, dash, client = free_ports(3)
    head = _start(["--head", f"--port={gcs}", "--include-dashboard=true", f"--dashboard-host={NODE_IP}",
                   f"--dashboard-port={dash}", f"--ray-client-server-port={client}"],
                  head_cpus, env, free_ports(6) + [_worker_port_base()])
    address, dashboard = f"{NODE_IP}:{gcs}", f"http://{NODE_IP}:{dash}"
    worker = None
    try:
        _wait_nodes(dashboard, 1, head, timeout_s)
        worker = _start([f"--address={address}"], worker_cpus, env, free_ports(6) + [_worker_port_base()])
        _wait_nodes(dashboard, 2, worker, timeout_s)
        _wait_job_server(dashboard, head, timeout_s)
    except BaseException:
        for node in (worker, head):
            if node is not None:
                node.stop()
                shutil.rmtree(node.temp_dir, ignore_errors=True)
        raise
    return TwoNodeCluster(head, worker, address, dashboard, env)


def _until(node: RayNode, timeout_s: float, what: str, attempt, retryable) -> None:
    """Call `attempt(deadline)` every 0.5 s until it returns True; an exception for which
    `retryable(exc)` holds is the service not up yet (kept for the timeout's message), any
    other propagates; `ray start` exiting ends the wait at once, with its log."""
    deadline = time.monotonic() + timeout_s
    last = None
    while time.monotonic() < deadline:
        if node.proc.poll() is not None:
            raise RuntimeError(f"ray start exited {node.proc.returncode}:\n{node.log.read_text()[-3000:]}")
        try:
            if attempt(deadline):
                return
        except Exception as exc:
            if not retryable(exc):
                raise
            last = exc
        time.sleep(0.5)
    raise TimeoutError(f"{what} after {timeout_s} s ({last}):\n{node.log.read_text()[-3000:]}")


def _wait_nodes(dashboard: str, count: int, node: RayNode, timeout_s: float) -> None:
    """Until the state API lists `count` alive nodes (any error: the dashboard not up yet)."""
    from ray.util.state import list_nodes

    def alive(_deadline: float) -> bool:
        nodes = list_nodes(address=dashboard, raise_on_missing_output=False)
        return sum(n.state == "ALIVE" for n in nodes) >= count

    _until(node, timeout_s, f"{count} Ray node(s) not alive", alive, lambda exc: True)


def _wait_job_server(dashboard: str, node: RayNode, timeout_s: float) -> None:
    """Until the job server takes a job: the dashboard answers before its node's job agent has
    registered, and a submission then fails with Ray's "No available agent to submit job,
    please try again later" (a clean-clone CI run met it). A trivial job submitted and
    finished proves the path `ray job submit` takes."""
    from ray.job_submission import JobStatus, JobSubmissionClient

    def probe_job(deadline: float) -> bool:
        client = JobSubmissionClient(dashboard)
        job = client.submit_job(entrypoint="true")
        while time.monotonic() < deadline:
            status = client.get_job_status(job)
            if status in (JobStatus.SUCCEEDED, JobStatus.FAILED, JobStatus.STOPPED):
                if status != JobStatus.SUCCEEDED:
                    raise RuntimeError(f"the probe job ended {status}: {client.get_job_logs(job)[-2000:]}")
                return True
            time.sleep(0.3)
        return False

    def agent_not_up(exc: Exception) -> bool:
        return isinstance(exc, RuntimeError) and ("No available agent" in str(exc) or "status code 5" in str(exc))

    _until(node, timeout_s, "the job server took no job", probe_job, agent_not_up)

"""A local S3-compatible server for the tests of an `s3://` lake: moto's standalone server
(`python -m moto.server`), a real HTTP server on 127.0.0.1 at a free port, that the product
reaches exactly as it reaches AWS (boto3 and pyarrow's S3 filesystem over HTTP, endpoint and
credentials from the standard AWS environment variables). One per test run (tests/conftest.py).

moto serves the S3 API and refuses a second `PUT` with `If-None-Match: *` on a key that exists
(412 Precondition Failed), but it checks the condition without a lock: a test of two
concurrent writers proves that the loser handles the refusal, not the server's atomicity.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass

REGION = "us-east-1"


@dataclass(frozen=True)
class S3Server:
    """A running moto server: its endpoint and the AWS environment that points at it."""

    endpoint_url: str
    process: subprocess.Popen

    def env(self) -> dict[str, str]:
        """The standard AWS variables a client needs to reach this server (fake credentials:
        moto accepts any)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": "twinlake-test",
            "AWS_SECRET_ACCESS_KEY": "twinlake-test-secret",
            "AWS_DEFAULT_REGION": REGION,
            "AWS_EC2_METADATA_DISABLED": "true",
            "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
        }

    def new_bucket(self) -> str:
        """A fresh, empty bucket (unique name) on this server."""
        import boto3

        name = f"twin-{uuid.uuid4().hex[:12]}"
        client = boto3.client("s3", endpoint_url=self.endpoint_url, region_name=REGION,
                              aws_access_key_id="twinlake-test", aws_secret_access_key="twinlake-test-secret")
        client.create_bucket(Bucket=name)
        return name

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(timeout_s: float = 120.0) -> S3Server:
    """Start `python -m moto.server` on 127.0.0.1 at a free port; return once it answers."""
    port = _free_port()
    process = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"moto server exited with {process.returncode} before answering")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return S3Server(f"http://127.0.0.1:{port}", process)
        except OSError:
            time.sleep(0.1)
    process.kill()
    raise RuntimeError(f"moto server did not answer on 127.0.0.1:{port} within {timeout_s} s")

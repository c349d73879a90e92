"""The filesystem handle of a lake: a pyarrow filesystem for data files, plus the one write a
commit log needs and pyarrow cannot send, "create this object only if it is absent".

    store = open_store(parse_location("s3://twin/lake"))   # or a local LakeLocation
    store.put_new("_log/00000000000000000001.json", body)  # True, or False if it exists
    store.fs, store.path("runs/robot=a/run=r/c-1/frames.parquet")   # pyarrow filesystem + path

`S3Store`: data files through `pyarrow.fs.S3FileSystem`; `put_new` is boto3's
`put_object(IfNoneMatch="*")` (S3 answers 412 Precondition Failed when the key exists: of two
writers of the same key exactly one succeeds). Endpoint, region and credentials are resolved
once by botocore from the standard AWS environment (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
`AWS_PROFILE`, ...) and config files, and handed to pyarrow too, so both clients talk to the
same server as the same user (pyarrow alone ignores `AWS_ENDPOINT_URL`).
`LocalStore`: the same operations on a directory; `put_new` writes a temporary file, fsyncs it
and hard-links it to the name (`link` fails if the name exists: all or nothing).
"""

from __future__ import annotations

import errno
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.fs as pafs

from .location import LakeLocation


class ObjectStoreError(OSError):
    """An object-storage request failed (no credentials, no such bucket, refused): one line
    naming the lake and what the server said."""


@dataclass
class LocalStore:
    """A lake directory as a store (`root` absolute)."""

    root: Path
    fs: pafs.FileSystem = field(default_factory=pafs.LocalFileSystem)

    def path(self, relative: str) -> str:
        return str(self.root / relative)

    def put_new(self, relative: str, data: bytes) -> bool:
        """Create `relative` with `data`, durably, only if absent; False if it exists."""
        target = self.root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
        with open(tmp, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, target)
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        dir_fd = os.open(target.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return True

    def read(self, relative: str) -> bytes | None:
        try:
            return (self.root / relative).read_bytes()
        except FileNotFoundError:
            return None

    def list_names(self, relative_dir: str, after: str = "") -> list[str]:
        """Names directly under `relative_dir` (files and directories) sorting after `after`,
        sorted; [] if absent."""
        try:
            return sorted(e for e in os.listdir(self.root / relative_dir) if not e.startswith(".") and e > after)
        except FileNotFoundError:
            return []

    def delete(self, relative: str) -> None:
        try:
            os.unlink(self.root / relative)
        except FileNotFoundError:
            pass

    def delete_prefix(self, relative_dir: str) -> int:
        """Delete the directory `relative_dir` and everything in it; returns 1 if it existed."""
        import shutil

        target = self.root / relative_dir
        if not target.exists():
            return 0
        shutil.rmtree(target)
        return 1


@dataclass
class S3Store:
    """A lake under `s3://bucket/prefix`: `fs` a pyarrow S3FileSystem, `client` a boto3 S3 client."""

    location: LakeLocation
    fs: pafs.FileSystem
    client: Any

    def path(self, relative: str) -> str:
        """The pyarrow filesystem path (`bucket/key`) of a path relative to the lake root."""
        return f"{self.location.bucket}/{self.location.key(relative)}"

    def put_new(self, relative: str, data: bytes) -> bool:
        from botocore.exceptions import ClientError

        try:
            self.client.put_object(Bucket=self.location.bucket, Key=self.location.key(relative),
                                   Body=data, IfNoneMatch="*")
        except ClientError as exc:
            status = exc.response.get("ResponseMetadata", {}).get("HTTPStatusCode")
            if status in (412, 409):  # exists; 409: a concurrent conditional write is in flight
                return False
            raise self._error(exc) from None
        return True

    def read(self, relative: str) -> bytes | None:
        from botocore.exceptions import ClientError

        try:
            body = self.client.get_object(Bucket=self.location.bucket, Key=self.location.key(relative))
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                return None
            raise self._error(exc) from None
        return body["Body"].read()

    def list_names(self, relative_dir: str, after: str = "") -> list[str]:
        """Names directly under `relative_dir` (objects and common prefixes) sorting after
        `after` (S3 `StartAfter`: the listing starts there), sorted."""
        prefix = self.location.key(relative_dir).rstrip("/") + "/"
        names: set[str] = set()
        paginator = self.client.get_paginator("list_objects_v2")
        start = {"StartAfter": prefix + after} if after else {}
        try:
            for page in paginator.paginate(Bucket=self.location.bucket, Prefix=prefix, Delimiter="/", **start):
                names.update(o["Key"][len(prefix):] for o in page.get("Contents", []))
                names.update(p["Prefix"][len(prefix):].rstrip("/") for p in page.get("CommonPrefixes", []))
        except Exception as exc:
            raise self._error(exc) from None
        return sorted(n for n in names if n)

    def delete(self, relative: str) -> None:
        try:
            self.client.delete_object(Bucket=self.location.bucket, Key=self.location.key(relative))
        except Exception as exc:
            raise self._error(exc) from None

    def delete_prefix(self, relative_dir: str) -> int:
        """Delete every object under `relative_dir/`; returns how many."""
        prefix = self.location.key(relative_dir).rstrip("/") + "/"
        count = 0
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(
                    Bucket=self.location.bucket, Prefix=prefix):
                keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                if keys:
                    self.client.delete_objects(Bucket=self.location.bucket, Delete={"Objects": keys, "Quiet": True})
                    count += len(keys)
        except Exception as exc:
            raise self._error(exc) from None
        return count

    def _error(self, exc: Exception) -> ObjectStoreError:
        text = str(exc).strip().splitlines()
        return ObjectStoreError(errno.EIO, f"{self.location.uri}: {text[0] if text else type(exc).__name__}")


Store = LocalStore | S3Store

_UPLOAD_BYTES = 8 << 20


def upload_tree(store: Store, local_dir: Path, relative_dir: str, threads: int = 8) -> None:
    """Copy every file under `local_dir` to `relative_dir/<same relative path>` of the store,
    a few files at a time, each streamed through the store's pyarrow filesystem (no directory
    marker objects are made: object storage has no directories)."""
    from concurrent.futures import ThreadPoolExecutor

    files = sorted(p for p in Path(local_dir).rglob("*") if p.is_file())

    def one(path: Path) -> None:
        target = store.path(f"{relative_dir}/{path.relative_to(local_dir).as_posix()}")
        if isinstance(store, LocalStore):
            Path(target).parent.mkdir(parents=True, exist_ok=True)
        with open(path, "rb") as src, store.fs.open_output_stream(target) as out:
            while chunk := src.read(_UPLOAD_BYTES):
                out.write(chunk)

    with ThreadPoolExecutor(max(1, min(threads, len(files)))) as pool:
        list(pool.map(one, files))


def open_store(location: LakeLocation) -> Store:
    """The store of a lake location (nothing is created; an S3 client is made, no request sent)."""
    if location.is_local:
        return LocalStore(Path(location.path).absolute())
    return _s3_store(location)


def _s3_store(location: LakeLocation) -> S3Store:
    import boto3

    session = boto3.session.Session()
    client = session.client("s3")
    credentials = session.get_credentials()
    if credentials is None:
        raise ObjectStoreError(errno.EACCES, f"{location.uri}: no AWS credentials found (set "
                               "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or AWS_PROFILE, or ~/.aws/credentials)")
    frozen = credentials.get_frozen_credentials()
    endpoint = client.meta.endpoint_url
    scheme, _, host = endpoint.partition("://")
    fs = pafs.S3FileSystem(
        access_key=frozen.access_key, secret_key=frozen.secret_key, session_token=frozen.token,
        region=client.meta.region_name or "us-east-1", endpoint_override=host, scheme=scheme,
        check_directory_existence_before_creation=False, allow_bucket_creation=False)
    return S3Store(location, fs, client)


_STORES: dict[LakeLocation, Store] = {}


def store_for(location: LakeLocation) -> Store:
    """The store of `location`, made once per process (clients are thread-safe)."""
    store = _STORES.get(location)
    if store is None:
        store = _STORES[location] = open_store(location)
    return store

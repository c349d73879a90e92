"""Raw inputs in a bucket: `twinlake ingest s3://bucket/raw/ ...` (a prefix or one object).

    local = fetch_inputs("s3://fleet/raw/2026-12-06/")   # -> $TMPDIR/twinlake-<uid>/inputs/fleet/raw/2026-12-06
    ingest_paths(lake, [local], options)                  # exactly as a local directory

The objects are copied, key for key, into this host's input mirror
(`$TMPDIR/twinlake-<uid>/inputs/<bucket>/<key>`) and ingested from there, so an input is read,
kept under `raw/` and hashed exactly as the same file on a local disk: the run and its
`raw_sha256` do not depend on where the recording was. A mirrored file is fetched again only
when the object's size or modification time differ from the copy's (the copy takes the
object's time). Endpoint and credentials: the AWS environment, as for a bucket lake
(catalog/object_store.py).

With `--workers` (ingest/fanout.py) a task that runs on a node without the driver's copy
fetches its own input: the object and the objects beside it that share its stem (its
companions, `run001.status.json`, `run001.meta.json`, ...), or a directory input's whole
prefix. So the nodes share only the bucket.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import pyarrow.fs as pafs

from ..catalog import LakeLocation

_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")


def is_remote(text: str) -> bool:
    """True for an input given as a URI (`s3://...`; other schemes are refused by `fetch_inputs`)."""
    return bool(_URI.match(str(text)))


def mirror_root() -> Path:
    """This host's input mirror: `$TMPDIR/twinlake-<uid>/inputs`."""
    return Path(tempfile.gettempdir()) / f"twinlake-{os.getuid()}" / "inputs"


def _split(uri: str) -> tuple[str, str]:
    m = _URI.match(uri)
    if m is None or m.group(1).lower() != "s3":
        scheme = m.group(1) if m else ""
        raise ValueError(f"{uri}: the {scheme!r} scheme is not supported for inputs; give a local path "
                         "or s3://bucket/prefix (endpoint from the AWS environment)")
    bucket, _, key = uri[m.end():].partition("/")
    if not bucket or any(part in (".", "..") for part in key.split("/")):
        raise ValueError(f"{uri}: expected s3://bucket/key-or-prefix")
    return bucket, key.strip("/")


def _filesystem(bucket: str) -> pafs.FileSystem:
    from ..catalog.object_store import store_for

    return store_for(LakeLocation(bucket=bucket)).fs


def fetch_inputs(uri: str) -> Path:
    """Mirror the object or every object under the prefix `uri`; returns the local file or
    directory. ValueError (naming the URI) when nothing is there or the scheme is not s3."""
    bucket, key = _split(uri)
    fs = _filesystem(bucket)
    info = fs.get_file_info(f"{bucket}/{key}")
    if info.type == pafs.FileType.File:
        _fetch(fs, info)
    else:
        infos = [i for i in fs.get_file_info(pafs.FileSelector(f"{bucket}/{key}".rstrip("/"), recursive=True,
                                                               allow_not_found=True))
                 if i.type == pafs.FileType.File]
        if not infos:
            raise ValueError(f"{uri}: no object at or under this key")
        _fetch_all(fs, infos)
        _drop_stale(mirror_root() / bucket / key, {mirror_root() / i.path for i in infos})
    return mirror_root() / bucket / key


def _drop_stale(directory: Path, kept: set[Path]) -> None:
    """Remove mirrored files of `directory` whose object is gone (they are not inputs now)."""
    for path in directory.rglob("*"):
        if path.is_file() and path not in kept:
            path.unlink()


def source_uri(path: Path) -> str | None:
    """The `s3://` URI a path of this host's input mirror copies, else None."""
    try:
        rel = Path(path).absolute().relative_to(mirror_root())
    except ValueError:
        return None
    bucket, _, key = rel.as_posix().partition("/")
    return f"s3://{bucket}/{key}"


def fetch_entry(uri: str) -> Path:
    """On a node without the driver's copy: mirror one input of a plan, a directory input's
    whole prefix, or a file and its companions (the objects beside it sharing its stem)."""
    bucket, key = _split(uri)
    fs = _filesystem(bucket)
    info = fs.get_file_info(f"{bucket}/{key}")
    if info.type == pafs.FileType.File:
        parent, _, name = info.path.rpartition("/")
        stem = name.split(".")[0]
        beside = fs.get_file_info(pafs.FileSelector(parent, recursive=False))
        _fetch_all(fs, [i for i in beside if i.type == pafs.FileType.File and i.base_name.startswith(stem)])
    else:
        _fetch_all(fs, [i for i in fs.get_file_info(pafs.FileSelector(info.path, recursive=True))
                        if i.type == pafs.FileType.File])
    return mirror_root() / bucket / key


def _fetch_all(fs: pafs.FileSystem, infos: list[pafs.FileInfo]) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: _fetch(fs, i), infos))


def _fetch(fs: pafs.FileSystem, info: pafs.FileInfo) -> Path:
    """Copy one object to the mirror unless the copy has its size and time already."""
    target = mirror_root() / info.path
    mtime_ns = info.mtime_ns or 0
    try:
        st = target.stat()
        if st.st_size == info.size and st.st_mtime_ns == mtime_ns:
            return target
    except FileNotFoundError:
        pass
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with fs.open_input_stream(info.path) as src, open(tmp, "wb") as out:
        while chunk := src.read(8 << 20):
            out.write(chunk)
    os.utime(tmp, ns=(mtime_ns, mtime_ns))
    os.replace(tmp, target)
    return target

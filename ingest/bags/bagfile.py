"""A bag on disk: what kind it is, its files, and an open reader with the types to decode it.

Kinds (`BAG_KINDS`): a rosbag2 directory (`metadata.yaml` + split files, sqlite3 or MCAP), a
lone `.mcap`, a lone `.db3` without `metadata.yaml`, a ROS 1 `.bag`. All are read with rosbags
(no bag parser here). Detection is by content: the MCAP magic, SQLite's header and a
`messages` table, `#ROSBAG V2.0`, a `rosbag2_bagfile_information` metadata file.

`OpenBag` holds the rosbags reader and one type store: rosbags' store of the ROS version
(ROS 1 Noetic, ROS 2 Humble) plus every definition the bag carries (these win), plus, for the
franka_msgs robot states a bag does not define, a kept version where it provably matches
(`definitions`). `undecodable` names each type it cannot decode and why.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..registry import IngestError, RawFile
from . import definitions as kept_defs

MCAP_MAGIC = b"\x89MCAP0\r\n"
SQLITE_MAGIC = b"SQLite format 3\x00"
ROS1_MAGIC = b"#ROSBAG V2.0\n"
BAG_KINDS = ("rosbag2_dir", "mcap", "sqlite3", "ros1")
_SUFFIX = {"mcap": ".mcap", "sqlite3": ".db3", "ros1": ".bag"}


def bag_kind(path: Path) -> tuple[str | None, str]:
    """(`kind`, why) of `path`, `kind` None when it is not a bag (cheap: a few bytes)."""
    if path.is_dir():
        meta = path / "metadata.yaml"
        if meta.is_file() and "rosbag2_bagfile_information" in meta.read_text(errors="replace")[:4096]:
            return "rosbag2_dir", "rosbag2 directory (metadata.yaml)"
        return None, "no rosbag2 metadata.yaml"
    part_of = _listed_in_directory(path)
    if part_of is not None:
        return None, (f"a storage file of the rosbag2 directory {part_of.name}/ (its "
                      "metadata.yaml lists it): ingest the directory")
    with path.open("rb") as fh:
        head = fh.read(16)
    if head.startswith(MCAP_MAGIC):
        return "mcap", "MCAP file"
    if head.startswith(ROS1_MAGIC[:13]):
        return "ros1", "ROS 1 bag (#ROSBAG V2.0)"
    if head.startswith(SQLITE_MAGIC) and (path.suffix == ".db3" or _has_messages_table(path)):
        return "sqlite3", "rosbag2 sqlite3 storage file"
    if head.startswith(SQLITE_MAGIC):
        return None, "a SQLite database without rosbag2's messages and topics tables"
    return None, "not a bag (no MCAP, SQLite rosbag2 or #ROSBAG header)"


def sqlite_truncation(path: Path) -> str | None:
    """Why the SQLite file `path` is shorter than its header says, else None. SQLite's own
    integrity_check passes a file cut inside its last page (it reads the missing bytes as
    zeros), so the size is checked against the header: a whole number of pages of the header's
    page size, at least its page count (when the count is valid: offset 92 equals the change
    counter at 24: "The Database Header", https://www.sqlite.org/fileformat.html)."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        head = fh.read(100)
    if len(head) < 100:
        return f"{size} bytes: shorter than SQLite's 100-byte header"
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    pages, counter, valid_for = (int.from_bytes(head[i:i + 4], "big") for i in (28, 24, 92))
    if page < 512 or page & (page - 1):
        return f"its header's page size {page} is not a power of two from 512 to 65536"
    if size % page:
        return f"{size} bytes is not a whole number of its {page}-byte pages (truncated)"
    if counter == valid_for and size < pages * page:
        return f"{size} bytes, its header says {pages} pages of {page} bytes (truncated)"
    return None


def _listed_in_directory(path: Path) -> Path | None:
    """The rosbag2 directory whose metadata.yaml lists `path`, else None."""
    meta = path.parent / "metadata.yaml"
    if path.suffix not in (".db3", ".mcap") or not meta.is_file():
        return None
    text = meta.read_text(errors="replace")
    return path.parent if "rosbag2_bagfile_information" in text and path.name in text else None


def _has_messages_table(path: Path) -> bool:
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        finally:
            con.close()
    except sqlite3.Error:
        return False
    return {"messages", "topics"} <= names


def bag_files(path: Path, kind: str) -> list[RawFile]:
    """The files to keep: a lone file; for a directory its metadata.yaml and every split file
    it lists (those present; a missing one is the reader's error)."""
    if kind != "rosbag2_dir":
        return [RawFile(path, "recording")]
    from ruamel.yaml import YAML

    info = YAML(typ="safe").load((path / "metadata.yaml").read_text())
    names = (info or {}).get("rosbag2_bagfile_information", {}).get("relative_file_paths", [])
    files = [RawFile(path / "metadata.yaml", "metadata")]
    files += [RawFile(path / Path(n).name, "recording") for n in names if (path / Path(n).name).is_file()]
    return files


def _check_storage_files(path: Path, kind: str) -> None:
    """Refuse a metadata.yaml listing a file twice, and a truncated SQLite storage file."""
    files = [f.path for f in bag_files(path, kind) if f.role == "recording"]
    if kind == "rosbag2_dir":
        from ruamel.yaml import YAML

        info = YAML(typ="safe").load((path / "metadata.yaml").read_text())
        names = [Path(n).name for n in ((info or {}).get("rosbag2_bagfile_information", {})
                                         .get("relative_file_paths", []) or [])]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise IngestError(path, f"metadata.yaml lists {', '.join(twice)} more than once in "
                              "relative_file_paths: expected each storage file once",
                              field="relative_file_paths")
    for f in files:
        if f.suffix == ".db3":
            why = sqlite_truncation(f)
            if why is not None:
                which = "SQLite storage file" if f == path else f"storage file {f.name}"
                raise IngestError(path, f"{which} is damaged: {why}; expected a whole SQLite "
                                  "database (the missing bytes would be read as data)")


@dataclass
class TypeSource:
    """Where a message type's definition came from: `bag`, `rosbags store`, or a kept
    franka_msgs version (`kept`), and whether each message must decode exactly (`exact`)."""

    origin: str
    exact: bool = False


class OpenBag(AbstractContextManager):
    """An open bag: `connections`, `ros` (1 or 2), `storage`, `compression`, `types`
    (msgtype → TypeSource), `undecodable` (msgtype → reason), `messages(...)`, `decoder(...)`."""

    def __init__(self, path: Path, kind: str) -> None:
        self.path, self.kind = path, kind
        self.ros = 1 if kind == "ros1" else 2
        if kind in _SUFFIX and path.suffix != _SUFFIX[kind]:
            raise IngestError(path, f"{kind} content but the name ends {path.suffix!r}: rosbags "
                              f"opens a lone storage file by its suffix; rename it to "
                              f"{path.stem}{_SUFFIX[kind]}")
        _guard(path, "read the storage files of", lambda: _check_storage_files(path, kind))
        self._reader = _guard(path, "open", lambda: _open_reader(path, self.ros))
        self.connections = list(self._reader.connections)
        self.storage, self.compression = _storage(self._reader, kind)
        self.types: dict[str, TypeSource] = {}
        self.undecodable: dict[str, str] = {}
        self.store = _guard(path, "read the definitions of", self._build_store)

    def __exit__(self, *exc: Any) -> None:
        self._reader.close()

    def messages(self, connections: Iterable[Any]) -> Iterator[tuple[Any, int, bytes]]:
        """(connection, receive time ns, raw bytes) in the bag's order; a read error (a
        truncated file, a bad chunk) is an IngestError naming the file."""
        it = self._reader.messages(connections=list(connections))
        while True:
            try:
                item = next(it)
            except StopIteration:
                return
            except Exception as exc:  # rosbags' errors, apsw's, struct's, lz4's, zstd's
                raise IngestError(self.path, f"cannot read the bag's messages: "
                                  f"{type(exc).__name__}: {exc}", kind="invalid") from None
            yield item

    def decoder(self, msgtype: str) -> Callable[[bytes], Any]:
        """raw bytes → message object; with a kept definition each message must decode to
        exactly its length (CDR: up to its 4-byte alignment), else SerdeError."""
        store = self.store
        if self.ros == 1:
            return lambda raw: store.deserialize_ros1(raw, msgtype)
        if not self.types[msgtype].exact:
            return lambda raw: store.deserialize_cdr(raw, msgtype)
        return exact_cdr_decoder(store, msgtype)

    def _build_store(self):
        """rosbags' store of the ROS version, plus the bag's definitions and kept ones (only
        those it lacks or defines otherwise: registering is code generation, ~1 ms a type)."""
        from rosbags.typesys import TypesysError

        store = base_store(self.ros)
        base = store.fielddefs
        carried = _carried_types(self.connections, self.ros)
        extra = {k: v for k, v in carried.items() if not _same(base.get(k), v)}
        for msgtype in sorted({c.msgtype for c in self.connections}):
            if msgtype in carried:
                self.types[msgtype] = TypeSource("bag")
            elif msgtype in base:
                self.types[msgtype] = TypeSource(f"rosbags store ({'ROS 1 Noetic' if self.ros == 1 else 'ROS 2 Humble'})")
            else:
                self._kept_type(msgtype, extra)
        try:
            store.register(extra)
        except TypesysError:  # the bag redefines a type of the store: the bag's wins
            from rosbags.typesys import Stores, get_typestore

            merged = dict(base) | extra
            store = get_typestore(Stores.EMPTY)
            store.register(merged)
        return store

    def _kept_type(self, msgtype: str, typs: dict) -> None:
        """Add a kept franka_msgs definition for `msgtype` when it provably matches."""
        tried = kept_defs.versions_tried(msgtype, self.ros)
        found = kept_defs.kept_for(msgtype, self.ros)
        if not found:
            self.undecodable[msgtype] = "no definition in the bag, none in rosbags' store or kept"
            return
        if self.ros == 1:
            digests = {c.digest for c in self.connections if c.msgtype == msgtype}
            match = next((kept_defs.ros1_match(msgtype, d) for d in digests), None)
            if match is None:
                self.undecodable[msgtype] = (f"no definition in the bag, and no kept version "
                                             f"({tried}) has its MD5 {', '.join(sorted(digests))}")
                return
        else:
            digests = {c.digest for c in self.connections if c.msgtype == msgtype} - {""}
            match = (_ros2_hash_match(found, digests) if digests
                     else self._ros2_trial(msgtype, found))
            if match is None:
                why = (f"its type hash {', '.join(sorted(digests))}" if digests else
                       "its messages do not decode to exactly their length")
                self.undecodable[msgtype] = (f"no definition in the bag, and no kept version "
                                             f"({tried}) matches: {why}")
                return
        typs.update(match.types())
        self.types[msgtype] = TypeSource(f"kept {match.label}", exact=self.ros == 2)

    def _ros2_trial(self, msgtype: str, found: list):
        """The first kept version under which the first 32 messages decode exactly."""
        conns = [c for c in self.connections if c.msgtype == msgtype]
        sample = []
        for _, _, raw in self.messages(conns):
            sample.append(raw)
            if len(sample) >= 32:
                break
        for kept in found:
            decode = exact_cdr_decoder(kept_defs.store_with(kept, base_store(2)), msgtype)
            try:
                for raw in sample:
                    decode(raw)
            except Exception:
                continue
            return kept
        return None


def base_store(ros: int):
    """A fresh copy of rosbags' store of ROS 1 Noetic or ROS 2 Humble."""
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS1_NOETIC if ros == 1 else Stores.ROS2_HUMBLE)


def _same(have, new) -> bool:
    """Two field definitions equal as rosbags compares them (names case-insensitive)."""
    if have is None:
        return False
    return [(x[0].lower(), x[1]) for x in have[1]] == [(x[0].lower(), x[1]) for x in new[1]]


def _ros2_hash_match(found: list, digests: set[str]):
    """The kept version whose RIHS01 type hash is the bag's (Iron on record one), else None."""
    for kept in found:
        store = kept_defs.store_with(kept, base_store(2))
        if {store.hash_rihs01(kept.msgtype)} == digests:
            return kept
    return None


def exact_cdr_decoder(store: Any, msgtype: str) -> Callable[[bytes], Any]:
    """A CDR decoder that refuses a message not decoding to exactly its length."""
    from rosbags.serde import SerdeError

    msgdef = store.get_msgdef(msgtype)
    le, be, cls = msgdef.deserialize_cdr_le, msgdef.deserialize_cdr_be, msgdef.cls

    def decode(raw: bytes) -> Any:
        view = memoryview(raw)
        try:
            msg, pos = (le if raw[1] else be)(view[4:], 0, cls, store)
        except Exception as exc:
            raise SerdeError(f"{len(raw)} bytes do not decode as {msgtype}: {exc}") from None
        rest = len(raw) - 4 - pos
        if rest < 0 or rest > (-pos) % 4:
            raise SerdeError(f"decodes to {pos + 4} of its {len(raw)} bytes as {msgtype}")
        return msg

    return decode


def _carried_types(connections: list, ros: int) -> dict:
    """The type dictionary of every definition the bag carries (empty ones ignored)."""
    from rosbags.interfaces import MessageDefinitionFormat
    from rosbags.typesys import get_types_from_idl, get_types_from_msg

    typs: dict = {}
    for c in connections:
        fmt, data = c.msgdef.format, c.msgdef.data
        if fmt == MessageDefinitionFormat.NONE or not data.strip():
            continue
        if fmt == MessageDefinitionFormat.MSG:
            typs.update(get_types_from_msg(data, c.msgtype))
        else:
            sep = "=" * 80 + "\n"
            parts = data.split(sep)[1:] if data.startswith(f"{sep}IDL: ") else [f"IDL: x\n{data}"]
            for part in parts:
                typs.update(get_types_from_idl(part.split("\n", 1)[1]))
    return typs


def _open_reader(path: Path, ros: int):
    if ros == 1:
        from rosbags.rosbag1 import Reader
    else:
        from rosbags.rosbag2 import Reader
    reader = Reader(path)
    reader.open()
    return reader


def _storage(reader: Any, kind: str) -> tuple[str, str]:
    """(storage, compression) as stored in run fields: e.g. ('rosbag2 sqlite3', 'zstd/file')."""
    if kind == "ros1":
        return "ros1 bag", "per chunk (none, bz2 or lz4)"
    fmt, mode = reader.compression_format, reader.compression_mode
    storage = {"mcap": "rosbag2 mcap", "sqlite3": "rosbag2 sqlite3"}.get(kind)
    if storage is None:
        plugins = {type(s).__name__ for s in getattr(reader.storage, "storages", [])}
        storage = "rosbag2 directory, " + ("mcap" if any("Mcap" in p for p in plugins) else "sqlite3")
    return storage, f"{fmt}/{mode}" if mode else "none"


def _guard(path: Path, what: str, action: Callable[[], Any]) -> Any:
    """Run `action`; a library error becomes an IngestError naming the file (an unsupported
    compression is named as such)."""
    try:
        return action()
    except IngestError:
        raise
    except Exception as exc:
        text = str(exc)
        if "ompression" in text:
            raise IngestError(path, f"compression not supported by rosbags: {text} (supported: "
                              "rosbag2 zstd file/message, MCAP lz4/zstd chunks, ROS 1 bz2/lz4 "
                              "chunks); decompress it (`ros2 bag convert`) and retry",
                              kind="invalid") from None
        raise IngestError(path, f"cannot {what} the bag: {type(exc).__name__}: {text}",
                          kind="invalid") from None

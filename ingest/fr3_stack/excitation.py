"""fr3_stack joint excitation output directory (`fr3_joint_excitation/v1`) → one run.

Source: fr3_stack `examples/joint_sysid.py` (docs/formats.md). The directory holds `reference.csv` (29 columns),
`commands_and_state.csv` (28 columns, execute mode only), `metadata.json` and `preview.svg`.
These are client send attempts plus the latest PUB state: **not** 1 kHz fit data. The run is
catalogued as command/state diagnostics: `fit_eligible = false`, and `sysid_ready` /
`nuc_log_verified` are kept as recorded. `commanded_*` gains were sent but never
acknowledged, so they are run fields, not the frames' applied `K_joint`/`D_joint`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa

from ...catalog import sha256_file
from ..canonical import conform_frames
from ..source_io import (SOURCE_FIELDS_TABLE, dumps, load_json,
                                           read_header, source_fields_table, try_json)
from ..registry import (Detection, IngestError, IngestUnit, RawFile, ReadOptions,
                                      register)

SCHEMA = "fr3_joint_excitation/v1"
J = range(1, 8)
REFERENCE_COLUMNS = (("t_s",) + tuple(f"q_ref{j}" for j in J) + tuple(f"dq_ref{j}" for j in J)
                     + tuple(f"ddq_ref{j}" for j in J) + tuple(f"jerk_ref{j}" for j in J))
COMMANDS_COLUMNS = (("seq", "trajectory_t_s", "send_start_monotonic_s", "send_return_monotonic_s",
                     "state_daemon_timestamp", "state_received_monotonic_s", "lateness_s")
                    + tuple(f"q_target{j}" for j in J) + tuple(f"q_measured{j}" for j in J)
                    + tuple(f"dq_measured{j}" for j in J))
RENAME = {"trajectory_t_s": "t_s", "state_daemon_timestamp": "robot_time_s",
          **{f"q_measured{j}": f"q{j}" for j in J}, **{f"dq_measured{j}": f"dq{j}" for j in J}}
CONTROLLER_JOINT_IMPEDANCE = 2


def _read_csv(path: Path, columns: tuple[str, ...]) -> pa.Table:
    from ..source_io import describe_mismatch, read_typed_csv

    header = read_header(path)
    if tuple(header) != columns:
        raise IngestError(path, f"header does not match: {describe_mismatch(header, columns)}",
                          line=1)
    return read_typed_csv(path, {c: pa.int64() if c == "seq" else pa.float64() for c in columns})


def commands_to_frames(table: pa.Table) -> pa.Table:
    """`commands_and_state.csv` → canonical frames: `t_s` = `trajectory_t_s` (client
    trajectory time of the send), `robot_time_s` = `state_daemon_timestamp` (robot clock of
    the sampled state), `q*`/`dq*` measured, `q_target*` as sent; `controller` = 2."""
    out = table.rename_columns([RENAME.get(c, c) for c in table.column_names])
    n = out.num_rows
    out = out.append_column("controller", pa.array([CONTROLLER_JOINT_IMPEDANCE] * n, pa.int32()))
    return out.append_column("schema_version", pa.array([1] * n, pa.int32()))


def _find_nuc_log(directory: Path, reference: str | None) -> Path | None:
    """The referenced NUC log, if a file of that name sits in the excitation directory, its
    parent or a sibling directory (the layout of a batch being ingested together)."""
    if not reference:
        return None
    name = Path(reference).name
    parent = directory.parent
    for cand in [directory / name, parent / name] + sorted(parent.glob(f"*/{name}")):
        if cand.is_file():
            return cand
    return None


def metadata_fields(path: Path, meta: dict) -> dict[str, Any]:
    """Run fields from `metadata.json` (everything kept verbatim in `metadata_json`)."""
    plan = meta.get("plan") if isinstance(meta.get("plan"), dict) else {}
    cmd = meta.get("commanded_controller_settings") or {}
    status = meta.get("status")
    exp = meta.get("experiment") if isinstance(meta.get("experiment"), dict) else {}
    payload = exp.get("payload_kg")
    return {
        "source_format": "fr3_joint_excitation", "source_version": 1,
        "robot_id": meta.get("robot_id"), "excitation_status": status,
        "complete": status == "completed" if status else None,
        "aborted": status in ("aborted", "failed") if status else None,
        "sysid_ready": meta.get("sysid_ready"), "nuc_log_verified": meta.get("nuc_log_verified"),
        "nuc_log_reference": meta.get("nuc_log_reference"), "fit_eligible": False,
        "diagnostics_only": True, "excitation_mode": plan.get("mode"),
        "command_rate_hz": plan.get("rate"), "anchor_q_rad": meta.get("anchor_q_rad"),
        "commanded_K_joint": cmd.get("K_joint"), "commanded_D_joint": cmd.get("D_joint"),
        "commanded_filter_alpha": cmd.get("filter_alpha"),
        "commanded_use_friction": cmd.get("use_friction"),
        "controller_settings_acknowledged": meta.get("controller_settings_acknowledged"),
        "commands_sent": meta.get("commands_sent"), "error": meta.get("error"),
        "payload_kg": float(payload) if isinstance(payload, (int, float)) else None,
        "plan_json": dumps(plan), "metadata_json": dumps(meta),
    }


class ExcitationReader:
    """A `joint_sysid.py` output directory (matched as a directory)."""

    name = "fr3_joint_excitation"

    def detect(self, path: Path) -> Detection:
        if not path.is_dir():
            return Detection.no("not a directory")
        meta = try_json(path / "metadata.json")
        if not isinstance(meta, dict):
            return Detection.no("no metadata.json object in the directory")
        if meta.get("schema") != SCHEMA:
            return Detection.no(f"metadata.json schema is {meta.get('schema')!r}, not {SCHEMA!r}")
        if not (path / "commands_and_state.csv").is_file() and not (
                meta.get("motion_command_attempted") or meta.get("commands_sent")):
            return Detection.no(f"{SCHEMA} preview only (status {meta.get('status')!r}): no "
                                "commands were sent and nothing was recorded, so it is not a run")
        return Detection(True, f"metadata.json schema {SCHEMA}", version=1)

    def read(self, path: Path, options: ReadOptions) -> IngestUnit:
        meta_path = path / "metadata.json"
        meta = load_json(meta_path)
        if not isinstance(meta, dict) or meta.get("schema") != SCHEMA:
            raise IngestError(meta_path, f"expected schema {SCHEMA!r}", field="schema")
        ref_path, cmd_path = path / "reference.csv", path / "commands_and_state.csv"
        if not ref_path.is_file():
            raise IngestError(ref_path, "reference.csv is missing (written in every mode)",
                              kind="missing")
        fields = metadata_fields(meta_path, meta)
        flags = ["diagnostics_only"]
        notes = ["client send attempts + latest PUB state (fr3_joint_excitation/v1): not 1 kHz "
                 "fit data; sysid_ready and nuc_log_verified are false"]
        raw = [RawFile(meta_path, "metadata"), RawFile(ref_path, "reference")]
        if cmd_path.is_file():
            frames = commands_to_frames(_read_csv(cmd_path, COMMANDS_COLUMNS))
            raw.insert(1, RawFile(cmd_path, "commands_and_state"))
        elif meta.get("motion_command_attempted") or (meta.get("commands_sent") or 0) > 0:
            raise IngestError(cmd_path, "commands_and_state.csv is missing but metadata.json "
                              "says commands were sent", kind="missing")
        else:
            raise IngestError(meta_path, f"preview only (status {meta.get('status')!r}): no "
                              "commands were sent and nothing was recorded", kind="empty")
        nuc = _find_nuc_log(path, fields["nuc_log_reference"])
        fields["linked_run"] = nuc.stem if nuc else None
        fields["linked_run_sha256"] = sha256_file(nuc) if nuc else None
        if fields["nuc_log_reference"] and nuc is None:
            flags.append("nuc_log_not_found")
            notes.append(f"nuc_log_reference {fields['nuc_log_reference']!r} not found beside it")
        if (path / "preview.svg").is_file():
            raw.append(RawFile(path / "preview.svg", "preview"))
        reference = _read_csv(ref_path, REFERENCE_COLUMNS)
        robot = options.robot or fields["robot_id"]
        return IngestUnit(robot=robot, run=options.run or path.name, frames=conform_frames(frames),
                          raw_files=raw, run_fields=fields, extra_tables={"reference": reference,
                                        SOURCE_FIELDS_TABLE: source_fields_table(fields)},
                          flags=flags, reasons=notes)


register(ExcitationReader())

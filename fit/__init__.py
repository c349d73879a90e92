"""twinlake.fit: population-based system identification on Ray, fit records in the lake.

Public face (see fit/README.md; the root package's commands use only these names):
  objective:  FitProblem (.residuals, .loss, .interval_losses), LossScales, ProblemData, build_data
  data:       IntervalRef, resolve (RUN[:INTERVAL] selectors → clean intervals)
  space:      ParameterSpace, parse_space (freeze / re-bound groups or joints), start_vector
  search:     MixedSearch (CMA-ES + categorical delay, best-ever, exact resume)
  driver:     FitSettings, run_fit, resume via run_fit(..., resume=True)
  torque:     TorqueFitSettings, fit_torque, held_out_scores, torque_validation
  trust:      validate_fit, Thresholds, compare_fits, identifiability_summary, quick_fit_run,
              Level, Status (a verdict's level, a parameter's status)
  records:    FitRecord, IntervalUse, SeedResult, load_fit, list_fits, publish_fit, export_fit,
              render_report, print_fit, current_verdict, record_verdict, import_results

The names are imported on first use (PEP 562, contracts/lazy.py), so that a user of the fit
records alone (`fit list`, `fit show`) does not pay for cma, scipy and MuJoCo:
`from twinlake.fit import run_fit` works as before.
"""

from __future__ import annotations

from ..contracts.lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(__name__, globals(), {
    # what a fit refuses, and why (the CLI maps a SettingError to its flag)
    "errors": ("DataError", "FitError", "FitNotFound", "ModelError", "RecordError", "SettingError"),
    # the replay search
    "core.intervals": ("IntervalRef", "resolve"),
    "core.needs": ("missing_in_run",),
    "core.objective": ("FitProblem", "LossScales", "ProblemData", "build_data"),
    "replay.search": ("MixedSearch",),
    "core.space": ("ParameterSpace", "parse_space"),
    "records.start": ("recorded_configurations", "start_vector"),
    "run": ("FitSettings", "run_fit"),
    # the torque route
    "torque": ("TorqueFitSettings", "fit_torque"),
    "torque.model.friction_basis": ("VELOCITY_SCALE_RAD_S",),
    "torque.held_out": ("held_out_scores", "is_torque_fit", "torque_validation"),
    # trust: validation, error bars, verdicts, the quick fit
    "trust.compare": ("compare_fits", "comparison_json"),
    "trust.gap_report": ("quick_fit_run",),
    "trust.identifiability": ("identifiability_summary",),
    "core.parameter_status": ("Status",),
    "trust.quick": ("QuickFitRefused",),
    "trust.validate": ("Thresholds", "validate_fit"),
    "trust.verdict": ("Level",),
    # records: the lake's fits, validations and verdicts, and what reads them
    "records.design_check": ("design_lines", "fit_design_checks", "realised_half_widths"),
    "reports.export": ("FORMATS", "default_name", "export_fit", "export_notes"),
    "records.frankatwin_import": ("import_results",),
    "records.record": ("FitRecord", "IntervalUse", "SeedResult", "list_fits", "load_fit", "publish_fit"),
    "reports.report": ("render_report",),
    "reports.report_lake": ("report_data_from_lake",),
    "reports.show": ("adequacy_lines", "console", "fit_summary", "fit_validations", "print_fit", "verdict_json"),
    "trust.statuses": ("fit_statuses",),
    "records.validation_record": ("publish_validation_record",),
    "reports.verdict_record": ("current_verdict", "record_verdict", "record_with_other_route", "stored_verdicts"),
})

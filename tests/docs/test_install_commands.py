"""README's install commands, .ci/run and constraints.txt agree with each other and with pyproject."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
REFRESH_HINT = "refresh the pins with the command under README.md's test command"


def _readme_command(after: str) -> str:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    match = re.search(rf"^{re.escape(after)}.*\n\n    (.+)$", text, re.MULTILINE)
    assert match, f"README.md has no indented command after a line starting {after!r}"
    return match.group(1)


def _pins() -> dict[str, str]:
    pins = {}
    for number, line in enumerate((ROOT / "constraints.txt").read_text().splitlines(), 1):
        if line.strip() and not line.startswith("#"):
            name, sep, version = line.partition("==")
            assert sep, f"constraints.txt line {number}: expected NAME==VERSION, got {line!r}"
            pins[canonicalize_name(name)] = version.strip()
    return pins


def test_ci_runs_exactly_the_readme_test_command():
    command = _readme_command("Set up and run the tests")
    lines = [ln for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip()]
    assert lines[-1] == command, ".ci/run must end with README.md's test command, verbatim"
    assert "-c constraints.txt" in command and "ruff check ." in command and "pytest -q" in command


def test_both_readme_commands_install_the_pins():
    for after in ("Set up and run the main job", "Set up and run the tests"):
        command = _readme_command(after)
        assert "pip install -q -c constraints.txt uv && uv pip install -q --compile-bytecode -c constraints.txt -e " in command


def test_the_installer_is_pinned_too():
    assert "uv" in _pins(), f"constraints.txt must pin uv, the installer both README commands use; {REFRESH_HINT}"


def test_every_declared_requirement_is_pinned_within_its_range():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = [*project["dependencies"], *(r for group in project["optional-dependencies"].values() for r in group)]
    pins = _pins()
    for spec in declared:
        req = Requirement(spec)
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is in pyproject.toml but not pinned in constraints.txt; {REFRESH_HINT}"
        assert req.specifier.contains(pins[name], prereleases=True), (
            f"constraints.txt pins {req.name}=={pins[name]}, outside pyproject's {spec!r}; {REFRESH_HINT}")

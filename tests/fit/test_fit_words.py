"""fit/ speaks in the domain's words: no message of its library floors names a command-line flag
or a `twinlake` command (its users include Python callers and the lake's readers; the CLI maps
fit's errors to its flags, twinlake/options.py). fit/reports/ is the presentation the CLI
prints (show, report, export) and may name the commands that follow from it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import twinlake.fit as fit_pkg

FIT = Path(fit_pkg.__file__).resolve().parent
PRESENTATION = {"reports"}
FLAG = re.compile(r"(?<![\w-])--[a-z][a-z-]+"
                  r"|\btwinlake (fit|campaign) (run|validate|show|list|report|export|compare|quick)\b"
                  r"|\btwinlake (sql|ingest|intervals)\b")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _messages(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _docstrings(tree)
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip]


def test_fit_messages_name_no_flag_outside_its_presentation():
    offenders = []
    for path in sorted(FIT.rglob("*.py")):
        if path.relative_to(FIT).parts[0] in PRESENTATION:
            continue
        for line, text in _messages(path):
            if FLAG.search(text):
                offenders.append(f"{path.relative_to(FIT)}:{line}: {text!r}")
    assert not offenders, "\n".join(offenders)


def test_the_rule_sees_a_flag_in_an_f_string(tmp_path):
    planted = tmp_path / "m.py"
    planted.write_text('"""doc --ok"""\n\ndef f(n):\n    """--fine"""\n    return f"raise {n} (try --refine)"\n')
    assert [t for _, t in _messages(planted) if FLAG.search(t)] == [" (try --refine)"]

"""A fresh `twinlake ingest` process imports none of what its path never uses (pandas,
hypothesis, scipy.linalg; pandera, which only names a violation; rich, when stderr is no terminal; with the decimal reader's C
kernels, neither polars nor numba; DuckDB it uses since publishing a run stores the run's
intervals, computed by the rules' SQL: catalog/stored_intervals.py), and what
`twinlake.lean_start.absent` hides stays importable afterwards."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from twinlake.ingest.samples import SampleSpec, write_sample

UNUSED = ("pandas", "hypothesis", "scipy.linalg", "pandera",
          "rich")  # rich draws the spinner on a terminal only (stderr is a pipe here)
KEEP_RUNNING = ("import twinlake.lean_start as lean_start\n"  # main's exit_now raises instead, so the
                "def _raise(code):\n    raise SystemExit(code)\n"   # test goes on after main()
                "lean_start.exit_now = _raise\n")
WITH_C_KERNELS = ("polars", "numba")  # the decimal reader's C kernels parse instead


def _python(code: str, cwd=None) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=cwd, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_absent_hides_only_inside_the_block_and_only_what_is_not_imported():
    out = _python("from twinlake.lean_start import absent\n"
                  "with absent():\n"
                  "    try:\n        import pandas\n    except ModuleNotFoundError as e:\n        print('absent', e.name)\n"
                  "import pandas, scipy.linalg\nprint('later', pandas.__name__, scipy.linalg.__name__)\n"
                  "with absent():\n    import pandas as again\nprint('imported already:', again is pandas)")
    assert out.splitlines() == ["absent pandas", "later pandas scipy.linalg", "imported already: True"]


def test_a_fresh_ingest_process_imports_nothing_its_path_does_not_use(tmp_path):
    from twinlake.ingest import decimal_native

    unused = UNUSED + (WITH_C_KERNELS if decimal_native.load() is not None else ())
    csv = write_sample(tmp_path / "run.csv", SampleSpec(rows=2000, seed=3))
    out = _python("import sys\n"
                  f"sys.argv = ['twinlake', 'ingest', 'run.csv', '--robot', 'r', '--run', 'x', '--lake', 'lake']\n"
                  "from twinlake.cli import main\n"
                  "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
                  f"print('loaded:', [m for m in {unused!r} if m in sys.modules])", cwd=csv.parent)
    assert out.splitlines()[-1] == "loaded: []", out
    partition = tmp_path / "lake" / "runs" / "robot=r" / "run=x"
    assert (partition / "frames.parquet").is_file() and (partition / "intervals.parquet").is_file()


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler: numba's kernels are the reader's")
def test_the_compiled_reader_of_a_fresh_process_loads_no_numba(tmp_path):
    """The decimal reader's C kernels (built by this test process if not yet) replace numba's."""
    from twinlake.ingest import decimal_native

    assert decimal_native.load() is not None
    csv = write_sample(tmp_path / "run.csv", SampleSpec(rows=2000, seed=4))
    out = _python("import sys\n"
                  "import twinlake.ingest.fr3_stack.recording_csv as r\n"
                  "r.DECIMAL_MIN_BYTES = 0  # this small file through the compiled reader too\n"
                  "sys.argv = ['twinlake', 'ingest', 'run.csv', '--robot', 'r', '--lake', 'lake']\n"
                  "from twinlake.cli import main\n"
                  "try:\n    main()\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
                  "print('loaded:', 'twinlake.ingest.decimal_csv' in sys.modules, 'numba' in sys.modules)",
                  cwd=csv.parent)
    assert out.splitlines()[-1] == "loaded: True False", out


def test_the_command_process_takes_arrows_system_allocator_unless_the_user_chose_one():
    code = ("import sys\nfrom twinlake.lean_start import main\nsys.argv = ['twinlake', 'catalog', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "import pyarrow as pa\nprint(pa.default_memory_pool().backend_name, file=sys.stderr)")
    env = {k: v for k, v in __import__("os").environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    for chosen, expected in ((None, "system"), ("jemalloc", "jemalloc")):
        run_env = env if chosen is None else {**env, "ARROW_DEFAULT_MEMORY_POOL": chosen}
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=run_env,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        assert done.stderr.strip().splitlines()[-1] == expected


def test_an_ingest_process_runs_numpys_blas_on_one_thread_unless_the_user_chose():
    """`twinlake ingest` (no BLAS call) does not start OpenBLAS's thread per core; other commands
    and a user's own setting are left alone."""
    code = ("import os, sys\nfrom twinlake.lean_start import main\n" + KEEP_RUNNING + "sys.argv = ['twinlake', sys.argv[1], '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "import numpy\nprint(os.environ.get('OPENBLAS_NUM_THREADS'), len(os.listdir('/proc/self/task')), file=sys.stderr)")
    env = {k: v for k, v in __import__("os").environ.items() if k != "OPENBLAS_NUM_THREADS"}
    seen = {}
    for command, chosen in (("ingest", None), ("catalog", None), ("ingest", "2")):
        run_env = env if chosen is None else {**env, "OPENBLAS_NUM_THREADS": chosen}
        done = subprocess.run([sys.executable, "-c", code, command], capture_output=True, text=True, env=run_env,
                              timeout=120)
        assert done.returncode == 0, done.stderr
        value, threads = done.stderr.strip().splitlines()[-1].split()
        seen[(command, chosen)] = (value, int(threads))
    assert seen[("ingest", None)][0] == "1" and seen[("catalog", None)][0] == "None"
    assert seen[("ingest", "2")][0] == "2"
    if (__import__("os").cpu_count() or 1) > 1:  # OpenBLAS starts no extra thread for one core
        assert seen[("ingest", None)][1] < seen[("catalog", None)][1]


def test_a_command_line_builds_the_command_it_names_alone_with_the_same_help():
    from typer.testing import CliRunner

    from twinlake.cli import build_app

    code = ("import sys\nfrom twinlake.lean_start import main\n" + KEEP_RUNNING + "sys.argv = ['twinlake', 'ingest', '--help']\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print(' '.join(sorted(m for m in sys.modules if m.startswith('twinlake.'))), file=sys.stderr)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    loaded = set(done.stderr.split())
    assert "twinlake.commands.ingest" in loaded
    assert not loaded & {"twinlake.demo", "twinlake.commands.fit", "twinlake.commands.lake",
                         "twinlake.commands.daemon", "twinlake.commands.campaign"}, loaded
    runner = CliRunner()
    for line in (["ingest", "--help"], ["fit", "run", "--help"], ["sim", "--help"]):
        whole = runner.invoke(build_app(), line, prog_name="twinlake")
        alone = runner.invoke(build_app(line[0]), line, prog_name="twinlake")
        assert whole.exit_code == alone.exit_code == 0
        assert alone.output == whole.output


def test_the_ingest_spinner_draws_on_a_terminal_and_nowhere_else():
    """`progress.terminal_status`: rich's spinner when stderr is a terminal (a pty here), and
    neither a drawing nor rich's import in a pipe; lines printed meanwhile are kept in both."""
    import os

    code = ("import sys, time\nfrom twinlake.progress import terminal_status\n"
            "with terminal_status('ingesting...') as status:\n"
            "    status('ingested a.csv'); print('error: kept', file=sys.stderr, flush=True); time.sleep(0.3)\n"
            "print('rich' in sys.modules, flush=True)")
    piped = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and piped.stdout.strip() == "False" and piped.stderr == "error: kept\n"
    main, child = os.openpty()
    done = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=child, text=True,
                          timeout=120, env={**os.environ, "TERM": "xterm", "COLUMNS": "80"})
    os.close(child)
    drawn = b""
    while True:
        try:
            piece = os.read(main, 65536)
        except OSError:  # the pty is closed once its writer has gone
            break
        if not piece:
            break
        drawn += piece
    os.close(main)
    assert done.returncode == 0 and done.stdout.strip() == "True"
    assert b"error: kept" in drawn and b"ingest" in drawn, drawn


def test_an_ingest_process_ends_without_teardown_and_keeps_every_line_and_exit_code(tmp_path):
    """`lean_start.exit_now` after `twinlake ingest`: every outcome line reaches a block-buffered
    stdout (a file) and stderr, the exit code is the command's (1: one input rejected; 2: usage),
    and the runs are published."""
    import os

    inputs = tmp_path / "in"
    inputs.mkdir()
    for k in range(3):
        write_sample(inputs / f"run{k}.csv", SampleSpec(rows=500, seed=10 + k))
    lines = (inputs / "run0.csv").read_text().splitlines(keepends=True)
    row = lines[5].split(",")
    lines[5] = ",".join(row[:3] + ["not-a-number"] + row[4:])
    (inputs / "broken.csv").write_text("".join(lines[:20]))
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("w") as stdout, err.open("w") as stderr:
        code = subprocess.run([sys.executable, "-m", "twinlake", "ingest", str(inputs), "--robot", "r",
                               "--lake", str(tmp_path / "lake")], stdout=stdout, stderr=stderr,
                              timeout=300).returncode
    assert code == 1, err.read_text()
    published = out.read_text().splitlines()
    assert [line.split(":")[0] for line in published] == ["run0.csv", "run1.csv", "run2.csv"], published
    assert "error: broken.csv" in err.read_text()
    assert sorted(os.listdir(tmp_path / "lake" / "runs" / "robot=r")) == ["run=run0", "run=run1", "run=run2"]
    usage = subprocess.run([sys.executable, "-m", "twinlake", "ingest", str(tmp_path / "absent.csv"),
                            "--lake", str(tmp_path / "lake")], capture_output=True, text=True, timeout=120)
    assert usage.returncode == 2 and "absent.csv" in usage.stderr

"""The commands that join a Ray cluster check `--address` before Ray is touched: the job
server's URL is refused with the `ray job submit` line and the install it needs; with the
cluster extra installed (as '.[test]' does) nothing it brings is missing."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from twinlake.cli import app
from twinlake.commands.cluster import CLUSTER_INSTALL, address_problem, missing_cluster_modules


def test_the_test_install_has_the_cluster_extra():
    assert missing_cluster_modules() == []
    assert address_problem("ray://127.0.0.1:10001") is None and address_problem("auto") is None


@pytest.mark.parametrize("command", [
    ["fit", "run", "--train", "r1"],
    ["campaign", "run", "--fit", "f", "--episodes", "1"],
])
def test_a_dashboard_url_as_address_says_what_to_do_instead(command, tmp_path):
    res = CliRunner().invoke(app, [*command, "--lake", str(tmp_path / "lake"), "--address", "http://127.0.0.1:8265"])
    assert res.exit_code == 2, res.output
    assert "ray job submit --address http://127.0.0.1:8265 -- twinlake ... --address auto" in res.stderr
    assert CLUSTER_INSTALL in res.stderr and not (tmp_path / "lake").exists()

"""docs/cli.md is generated from the typer app (twinlake/clidoc.py) and must not drift from it."""

from __future__ import annotations

from pathlib import Path

import pytest
import typer

from twinlake import clidoc

CLI_MD = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def test_docs_cli_md_is_what_the_app_generates():
    expected = clidoc.generate()
    actual = CLI_MD.read_text(encoding="utf-8")
    assert actual == expected, (
        f"{CLI_MD} differs from the typer app's commands and options; regenerate it with "
        f"`{clidoc.REGENERATE}` (prose goes in twinlake/clidoc.md, not in docs/cli.md)")


def test_every_command_of_the_app_has_a_section():
    from twinlake.cli import app

    text = clidoc.generate()
    paths = [d.path for d in clidoc.walk(typer.main.get_command(app))]
    for path in ("twinlake demo", "twinlake fit run", "twinlake fit report", "twinlake ingest", "twinlake sql"):
        assert path in paths
    for path in paths:
        assert f" `{path}`\n" in text, f"no section for {path}"


def _toy_app() -> typer.Typer:
    app = typer.Typer()
    tools = typer.Typer(help="Tools.")

    @tools.command("grind")
    def grind(
        part: str = typer.Argument(..., help="Part id."),
        speed_rpm: int = typer.Option(300, min=10, max=900, help="Spindle speed, rpm."),
        coolant: bool = typer.Option(True, "--coolant/--dry", help="Use coolant."),
        tag: list[str] = typer.Option([], help="A tag | label."),
    ) -> None:
        """Grind a part.

        Second paragraph.
        """

    @app.command("hello")
    def hello(loud: bool = typer.Option(False, "--loud", help="Shout.")) -> None:
        """Say hello."""

    app.add_typer(tools, name="tools")
    return app


def test_render_documents_usage_options_defaults_and_places_notes():
    root = typer.main.get_command(_toy_app())
    notes = clidoc.read_notes("editor's note\n<!-- intro -->\nThe intro.\n<!-- twinlake tools grind -->\nGrind prose.\n")
    text = clidoc.render(root, notes)
    assert "editor's note" not in text and "The intro." in text
    assert "| `twinlake tools grind` | Grind a part. |" in text  # first paragraph only
    assert "```\ntwinlake tools grind [OPTIONS] PART\n```" in text
    assert "| `PART` | Part id. |" in text
    assert "| `--speed-rpm SPEED_RPM` | Spindle speed, rpm. (range 10 ≤ x ≤ 900) (default `300`) |" in text
    assert "| `--coolant / --dry` | Use coolant. (default `--coolant`) |" in text
    assert "| `--tag TAG` | A tag \\| label. (repeatable) |" in text
    assert "| `--loud` | Shout. |" in text
    grind_at, prose_at, hello_at = (text.index(s) for s in ("### `twinlake tools grind`", "Grind prose.",
                                                             "## `twinlake hello`"))
    assert hello_at < grind_at < prose_at  # registration order; notes under their command


def test_notes_for_a_command_the_app_lacks_are_refused():
    root = typer.main.get_command(_toy_app())
    with pytest.raises(ValueError, match="twinlake tools polish"):
        clidoc.render(root, clidoc.read_notes("<!-- twinlake tools polish -->\ngone\n"))
    with pytest.raises(ValueError, match="appears twice"):
        clidoc.read_notes("<!-- intro -->\na\n<!-- intro -->\nb\n")

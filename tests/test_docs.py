"""The README and docs/ stay true: the generated tables equal what their generators make now, the
commands marked for it run, and the README stays a front door (short, no commit, no absent tool)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench import report
from webhook.commands import docs

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Put before a ```sh block whose commands need no cluster: the test runs each line.
OFFLINE = "<!-- test: offline -->"


def offline_commands(text: str) -> list[str]:
    """The command lines of every ```sh block right after an ``OFFLINE`` marker (comments and
    blank lines left out)."""
    out = []
    for block in re.findall(re.escape(OFFLINE) + r"\n```sh\n(.*?)\n```", text, flags=re.DOTALL):
        for line in block.splitlines():
            command = line.split("  #")[0].strip()
            if command and not command.startswith("#"):
                out.append(command)
    return out


def test_the_flag_table_is_generated_from_the_settings() -> None:
    page = ROOT / "docs" / "configuration.md"
    text = page.read_text()
    assert docs.with_table(text, docs.flag_table()) == text, (
        "docs/configuration.md's flag table differs from draxr serve's flags: run "
        "`.venv/bin/python -m webhook.commands.docs flags --write docs/configuration.md`"
    )
    # Every flag of draxr serve is in it, with the default its settings class holds.
    assert "| `--qps` | `200` |" in text
    assert "| `--policy` | `binpack` |" in text
    assert "| `--cert-validity DURATION` | `90d` |" in text


def test_the_flag_table_check_fails_on_a_stale_table(tmp_path: Path) -> None:
    page = tmp_path / "configuration.md"
    stale = (
        (ROOT / "docs" / "configuration.md").read_text().replace("| `--qps` | `200` |", "| `--qps` | `60` |")
    )
    page.write_text(stale)
    assert docs.main(["flags", "--check", str(page)]) == 1
    assert docs.main(["flags", "--write", str(page)]) == 0
    assert docs.main(["flags", "--check", str(page)]) == 0


def test_a_page_without_markers_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "empty.md"
    page.write_text("# nothing here\n")
    assert docs.main(["flags", "--check", str(page)]) == 2


def test_performance_is_generated_from_the_recorded_results() -> None:
    assert (ROOT / "docs" / "performance.md").read_text() == report.render(report.load()), (
        "docs/performance.md differs from bench/results: run `.venv/bin/python bench/report.py --write`"
    )


def test_every_recorded_result_names_a_script_that_exists() -> None:
    for doc in report.load():
        for script in doc["bench"]:
            assert (ROOT / script).is_file(), script


def test_a_result_without_its_figures_is_refused(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text('{"order": 1, "bench": [], "arguments": "", "date": "", "measured": ""}')
    with pytest.raises(ValueError, match=r"x\.json: missing figures"):
        report.load(tmp_path)


def test_the_readme_is_a_front_door() -> None:
    text = (ROOT / "README.md").read_text()
    lines = text.splitlines()
    assert len(lines) <= 200
    head = "\n".join(lines[:40])
    assert "make demo" in head
    assert "make test" in head
    for name in ("install", "modes", "placement", "configuration", "metrics", "troubleshooting"):
        assert f"docs/{name}.md" in text


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_no_commit_hash_nor_absent_tool_is_named(page: Path) -> None:
    text = page.read_text()
    for word in ("farm-", "py-spy"):
        assert word not in text, f"{page.name} names {word}"
    hashes = re.findall(r"(?<![\w/.-])[0-9a-f]{7,40}(?![\w-])", text)
    assert [h for h in hashes if re.search(r"[a-f]", h) and re.search(r"\d", h)] == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_lead_to_files_and_headings(page: Path) -> None:
    text = page.read_text()
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://")):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target}"
        if anchor and linked.suffix == ".md":
            headings = re.findall(r"^#+ (.+)$", linked.read_text(), flags=re.MULTILINE)
            slugs = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}
            assert anchor in slugs, f"{page.name}: {target}"


def test_the_offline_tour_is_found() -> None:
    commands = offline_commands((ROOT / "README.md").read_text())
    assert any(c.startswith("draxr plan ") for c in commands)
    assert any(c.startswith("draxr certs ") for c in commands)


@pytest.mark.parametrize(
    "command", [c for p in PAGES for c in offline_commands(p.read_text())], ids=lambda c: c.split(" >")[0]
)
def test_offline_commands_run(command: str, tmp_path: Path) -> None:
    """Each command, as a reader would type it after `pip install .`, in a directory of its own that
    holds the repository's examples."""
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(
        command, shell=True, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, f"{command}: exit {done.returncode}\n{done.stderr}"

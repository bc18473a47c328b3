"""docs/capacity-planning.md, "From your CSV to a cluster size in two commands": the two
commands, run exactly as the doc shows them on the CSV it shows, give the answer it shows."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

import gangopt.replay.capacity
import gangopt.replay.sweep
from gangopt.cli import main

ROOT = Path(__file__).resolve().parent.parent.parent
DOC = ROOT / "docs" / "capacity-planning.md"
FIXTURE = ROOT / "tests" / "fixtures" / "trace" / "jobs.csv"
TITLE = "## From your CSV to a cluster size in two commands"


def _section() -> str:
    text = DOC.read_text(encoding="utf-8")
    start = text.index(TITLE)
    end = text.index("\n## ", start + len(TITLE))
    return text[start:end]


def _blocks(section: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", section, flags=re.S)


def test_the_csv_shown_is_the_fixture() -> None:
    (shown,) = _blocks(_section(), "csv")
    lines = [line for line in shown.splitlines() if line != "..."]
    assert FIXTURE.read_text(encoding="utf-8").splitlines()[: len(lines)] == lines


def test_the_two_commands_give_the_documented_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (commands,) = _blocks(_section(), "sh")
    (expected,) = _blocks(_section(), "text")
    lines = [line for line in commands.splitlines() if line.strip()]
    assert len(lines) == 2 and all(line.startswith("gangopt ") for line in lines)
    shutil.copy(FIXTURE, tmp_path / "jobs.csv")
    monkeypatch.chdir(tmp_path)
    # In-process (no worker processes to spawn): the replays are deterministic, so the answer
    # is the one the doc's run on two cores found; only the sizes probed may differ.
    monkeypatch.setattr(gangopt.replay.sweep, "default_workers", lambda: 1)
    monkeypatch.setattr(gangopt.replay.capacity, "default_workers", lambda: 1)
    for line in lines:
        assert main(shlex.split(line)[1:]) == 0, line
    out = capsys.readouterr().out
    assert (tmp_path / "jobs.json").is_file()
    for prefix in ("answer:", "compaction", "inflation (", "peak demand"):
        documented = next(x for x in expected.splitlines() if x.startswith(prefix))
        assert documented in out.splitlines(), prefix
    # the inflation tries, printed as they were found, are the documented ones (but for timings)

    def tries(text: str) -> list[str]:
        return [x.split(" [")[0] for x in text.splitlines() if x.startswith("inflation: ")]

    assert tries(out) == tries(expected) and len(tries(out)) >= 2
    meets = {int(row.split()[0]) for row in expected.splitlines() if row.endswith("meets")}
    fails = {int(row.split()[0]) for row in expected.splitlines() if row.endswith("fails")}
    for row in out.splitlines():
        if row.endswith(("meets", "fails")):
            nodes = int(row.split()[0])
            assert (nodes in meets) if row.endswith("meets") else (nodes not in meets), row
            assert row in expected.splitlines() or nodes not in meets | fails
    # each size's verdict was printed as it was found, and agrees with the table
    searching = [(int(row.split()[1]), row.split()[3]) for row in out.splitlines() if row.startswith("searching: ")]
    assert (min(meets), "meet:") in searching
    assert all((verb == "meet:") == (n in meets) for n, verb in searching if n in meets | fails)
    # the report folder the doc sends the reader to: one HTML page with the answer and the plots
    page = (tmp_path / "report" / "report.html").read_text(encoding="utf-8")
    answer = next(x for x in expected.splitlines() if x.startswith("answer:")).split()[1]
    assert f"<strong>{answer} nodes</strong>" in page
    assert page.count('src="data:image/png;base64,') == 3  # SLO vs size, timeline, wait CDF
    assert "report/report.html" in _section()


def test_readme_gives_the_same_two_commands_and_its_csv_is_as_described(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """README's capacity section opens with the doc's two commands (the newcomer's path), and
    the 300-job CSV it quotes a measured answer for is what it says: 300 jobs of 1 to 32 GPUs
    submitted over about 24 h, none of which the pre-flight check refuses at the answer."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## Capacity planning") :]
    (first,) = _blocks(section, "sh")[:1]
    shown = [line.split("#")[0].strip() for line in first.splitlines() if line.strip()]
    (commands,) = _blocks(_section(), "sh")
    assert shown == [line.strip() for line in commands.splitlines() if line.strip()]
    walkthrough = ROOT / "docs" / "capacity" / "walkthrough-jobs.csv"
    assert f"`{walkthrough.relative_to(ROOT)}` (300 jobs of 1-32 GPUs over 24 h)" in " ".join(section.split())
    workload = tmp_path / "jobs.json"
    assert main(["import", "trace", str(walkthrough), "-o", str(workload)]) == 0
    summary = capsys.readouterr().err
    assert "300 jobs arriving over 23.6 h" in summary and "largest 32 GPUs" in summary
    assert main(["simulate", str(workload), "--nodes", "15", "--policy", "greedy", "--horizon", "0"]) == 0

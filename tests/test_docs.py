"""The generated reference pages match the code."""

import re
from pathlib import Path

from forge_opt.tools import gen_docs


def test_generated_docs_are_current():
    docs = Path(__file__).resolve().parent.parent / "docs"
    assert gen_docs.main(["--check", "--docs", str(docs)]) == 0, "run python -m forge_opt.tools.gen_docs"


ROOT = Path(__file__).resolve().parent.parent


def test_docs_stay_inside_the_repository():
    """A clone has every page the README and the docs point to."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    outside = [f"{p.name}: {line.strip()}" for p in pages for line in p.read_text().splitlines() if "../shared" in line]
    assert not outside, "\n".join(outside)
    for link in re.findall(r"\]\(([^)#]+)\)", (ROOT / "README.md").read_text()):
        if "://" not in link:
            assert (ROOT / link).exists(), f"README links to {link}, which the repository lacks"


def test_the_design_names_files_that_exist():
    text = (ROOT / "docs" / "design.md").read_text()
    folders = "dialects|transforms|interpreters|targets|check|tools|tests|frontends|lit_tests"
    for path in re.findall(rf"`((?:{folders})/[\w./]+\.(?:py|md|onnxtxt))`", text):
        assert (ROOT / path).exists(), f"docs/design.md names {path}, which does not exist"


def test_the_readme_split_report_is_what_forge_split_prints(tmp_path, capsys):
    """The README's forge-split example, run: its report is the one shown."""
    import pytest

    from forge_opt.tools.forge_split import main

    readme = (ROOT / "README.md").read_text()
    shown = readme.split("```\ngraph    device")[1].split("```")[0]
    with pytest.raises(SystemExit) as done:
        main([str(ROOT / "examples" / "detector.onnxtxt"), "-o", str(tmp_path / "det"), "--min-device-ops", "2"])
    assert done.value.code == 0
    assert capsys.readouterr().out == "graph    device" + shown


def test_the_readme_tensor_parallel_table_is_what_forge_opt_prints(tmp_path, capsys):
    """The README's GPT-2 table for four devices, compiled: each line shown
    is printed (the README elides devices 1 to 3)."""
    from forge_opt.tools.forge_opt import run

    readme = (ROOT / "README.md").read_text()
    shown = "device   parameters" + readme.split("```\ndevice   parameters")[1].split("```")[0]
    model = ROOT / "tests" / "data" / "models" / "gpt2_opset17.onnx"
    assert run([str(model), "-p", "onnx-to-forge{devices=4}", "-t", "forge-python", "-o", f"{tmp_path}/"]) == 0
    printed = capsys.readouterr().out.splitlines()
    for line in shown.splitlines():
        if line.strip() and line != "...":
            assert line in printed, line

"""The generated reference pages match the code."""

from pathlib import Path

from forge_opt.tools import gen_docs


def test_generated_docs_are_current():
    docs = Path(__file__).resolve().parent.parent / "docs"
    assert gen_docs.main(["--check", "--docs", str(docs)]) == 0, "run python -m forge_opt.tools.gen_docs"

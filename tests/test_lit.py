"""Run the lit suite once and report each lit test as its own pytest test."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

LIT_DIR = Path(__file__).resolve().parent.parent / "lit_tests"
TESTS = sorted(
    str(p.relative_to(LIT_DIR))
    for p in LIT_DIR.rglob("*")
    if p.suffix in (".mlir", ".onnxtxt") and "Inputs" not in p.parts and "Output" not in p.parts
)


@pytest.fixture(scope="session")
def lit_results() -> dict[str, tuple[str, str]]:
    proc = subprocess.run(
        [sys.executable, "-c", "from lit.main import main; main()", str(LIT_DIR), "-v"],
        capture_output=True,
        text=True,
    )
    results: dict[str, tuple[str, str]] = {}
    for m in re.finditer(r"^(\w+): forge-opt :: (\S+) \(\d+ of \d+\)$", proc.stdout, re.M):
        results[m.group(2)] = (m.group(1), "")
    for m in re.finditer(
        r"^\*+ TEST 'forge-opt :: (\S+)' FAILED \*+$(.*?)^\*+$", proc.stdout, re.M | re.S
    ):
        status, _ = results.get(m.group(1), ("FAIL", ""))
        results[m.group(1)] = (status, m.group(2))
    if not results:
        pytest.fail(f"lit ran no test:\n{proc.stdout}\n{proc.stderr}")
    return results


@pytest.mark.parametrize("test", TESTS)
def test_lit(test, lit_results):
    status, log = lit_results.get(test, ("MISSING", "lit did not report this test"))
    if status == "UNSUPPORTED":
        pytest.skip(f"lit: {test} needs a feature this machine lacks (see its REQUIRES line)")
    assert status == "PASS", f"lit {status}: {test}\n{log}"

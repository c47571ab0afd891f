"""Every ONNX backend node test through the whole pipeline (see
tools/conformance.py). Cases listed in conformance_expectations.txt must
fail; every other case must pass, so the list and docs/supported_ops.md
stay true."""

from pathlib import Path

import pytest

from forge_opt.tools.conformance import node_cases, read_expectations, run_case

CASES = node_cases()
EXPECTED_FAILURES = read_expectations(Path(__file__).parent / "conformance_expectations.txt")


def test_expectations_name_real_cases():
    assert EXPECTED_FAILURES, "tests/conformance_expectations.txt is missing or empty"
    names = {c.name for c in CASES}
    assert not set(EXPECTED_FAILURES) - names


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_node_case(case):
    result = run_case(case)
    if case.name in EXPECTED_FAILURES:
        assert not result.passed, (
            f"{case.name} passes now: remove it from tests/conformance_expectations.txt "
            "(python -m forge_opt.tools.conformance --write)"
        )
    else:
        assert result.passed, result.reason

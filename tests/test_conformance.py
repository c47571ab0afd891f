"""Every ONNX backend node test through the whole pipeline (see
tools/conformance.py). Cases listed in conformance_expectations.txt must
fail; every other case must pass, so the list and docs/supported_ops.md
stay true."""

import re
from pathlib import Path

import pytest

from forge_opt.tools.conformance import node_cases, read_expectations, run_case, run_case_parallel, run_case_split

CASES = node_cases()
EXPECTED_FAILURES = read_expectations(Path(__file__).parent / "conformance_expectations.txt")
EXPECTED_SPLIT_FAILURES = read_expectations(Path(__file__).parent / "conformance_split_expectations.txt")


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


@pytest.mark.slow
def test_every_case_that_passes_passes_on_xla_too():
    """The same cases, each program's StableHLO form on XLA CPU: an
    independent compiler agrees with the stand-in on every one (1,404)."""
    failed = [f"{c.name}: {r.reason}" for c in CASES if c.name not in EXPECTED_FAILURES
              for r in [run_case(c, "xla")] if not r.passed]
    assert not failed, "\n".join(failed[:20])


def test_every_case_that_passes_passes_on_two_devices():
    """Issue 52, item 4: each case that runs on one device runs tensor-
    parallel on two and gives the case's outputs, or is refused by a
    message that names the node; never a crash. Found by it: a program
    that returns its input had no plan ("no tensor has attr 'output'"), and
    bfloat16 outputs with NaN were "the devices' outputs differ"."""
    problems = []
    for c in CASES:
        if c.name in EXPECTED_FAILURES:
            continue
        r = run_case_parallel(c)
        # (the reason reads `node 'N' (tir.reshape): ...` as `tir.reshape: ...`)
        if not r.passed and not re.match(r"does not compile: (onnx|tir)\.\w+: ", r.reason):
            problems.append(f"{c.name}: {r.reason}")
    assert not problems, "\n".join(problems)


FAILING_WHOLE = [c for c in CASES if c.name in EXPECTED_FAILURES]


def test_split_expectations_name_cases_that_fail_whole():
    assert EXPECTED_SPLIT_FAILURES, "tests/conformance_split_expectations.txt is missing or empty"
    assert set(EXPECTED_SPLIT_FAILURES) <= set(EXPECTED_FAILURES)


@pytest.mark.parametrize("case", FAILING_WHOLE, ids=[c.name for c in FAILING_WHOLE])
def test_node_case_through_the_split_path(case):
    """A case Forge cannot run whole, split into device and CPU sub-models."""
    result = run_case_split(case)
    if case.name in EXPECTED_SPLIT_FAILURES:
        assert not result.passed, (
            f"{case.name} passes through the split path now: remove it from "
            "tests/conformance_split_expectations.txt (python -m forge_opt.tools.conformance --write)"
        )
    else:
        assert result.passed, result.reason

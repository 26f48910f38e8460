"""tvm_ffi through every route of the value oracle (frameworks.py, oracle.py)."""

import pytest

import frameworks

FW = frameworks.require("tvm_ffi")


@pytest.mark.parametrize("case", frameworks.named_cases(FW), ids=str)
def test_named_case(case):
    frameworks.check_case(FW, case)


@frameworks.property_test(FW, examples=30)
def test_random_case(case):
    frameworks.check_case(FW, case)


@pytest.mark.parametrize("case", frameworks.consumer_cases(), ids=str)
def test_consumes_dlbridge(case):
    frameworks.check_consumer(FW, case)

"""pyarrow.Tensor through every route of the value oracle (frameworks.py,
oracle.py): its strided tensors' copy=True is pyarrow 26's wrong copy,
which dlbridge asks again without copy and copies itself."""

import pytest

import frameworks

FW = frameworks.require("pyarrow Tensor")


@pytest.mark.parametrize("case", frameworks.named_cases(FW), ids=str)
def test_named_case(case):
    frameworks.check_case(FW, case)

"""A producer written with ctypes (oracle.HandMade) through every route of
the value oracle: every DLPack dtype code, sub-byte elements packed and
padded, byte_offset, NULL strides and shapes, legacy capsules; what
dlbridge takes in also consumed by every framework loadable here."""

import pytest

import frameworks

FW = frameworks.ALL["ctypes"]
CONSUMERS = frameworks.consumers_here()


@pytest.mark.parametrize("case", frameworks.hand_cases(), ids=str)
def test_named_case(case):
    frameworks.check_case(FW, case, CONSUMERS)


@frameworks.property_test(FW, examples=40, draw=frameworks.draw_hand_case)
def test_random_case(case):
    frameworks.check_case(FW, case, CONSUMERS)

"""What a test file of the peer environment does when a peer is missing.

43-sdist.sh runs tests/python with the peer environment's packages and
DLBRIDGE_PEERS_REQUIRED=1: there a missing peer (python/requirements/
peers.txt names them all) fails the file. Elsewhere (the standard-library
and Debian runs) the file is skipped, and says which peer is missing."""

import os

import pytest


def missing(error, what):
    """Called from a test file's `except ImportError as error:` around its
    peer imports; `what` names the peers ("JAX", "torch 2, JAX and tvm-ffi")."""
    if os.environ.get("DLBRIDGE_PEERS_REQUIRED"):
        pytest.fail("%s pinned in python/requirements/peers.txt but missing: %s" % (what, error), pytrace=False)
    pytest.skip("skipped: %s, the peer environment's, missing here (%s)" % (what, error), allow_module_level=True)

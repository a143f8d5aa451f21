import os

import matplotlib

matplotlib.use("Agg")
os.environ.setdefault("HELPERS_THREADS", "1")


import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _no_flush_denormal_leak():
    """A data script may set torch's flush-subnormals-to-zero (04's make_recall.py for recall2, a speed fix); it is
    process-wide CPU state, so a test that runs such a script in-process must not leave it on for the next test in
    the same worker (hypothesis refuses to draw subnormal floats when FTZ/DAZ is set)."""
    yield
    import sys

    if "torch" in sys.modules:
        sys.modules["torch"].set_flush_denormal(False)

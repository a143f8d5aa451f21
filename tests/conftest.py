import os

import matplotlib

matplotlib.use("Agg")
os.environ.setdefault("HELPERS_THREADS", "1")

"""Train the labelled variant ``propagators_filled`` of chapter 11_anchor_video_edit (written with
``helpers.checkpoints`` by make_propagators.py): the same script run with ``--name propagators_filled``, so that
``make data NB=11_anchor_video_edit`` builds both checkpoints and the command the manifest names exists.
``--tiny``, ``--out``, ``--seeds`` and ``--workers`` work as in make_propagators.py.
"""

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.argv = [sys.argv[0], *sys.argv[1:], "--name", "propagators_filled"]
    runpy.run_path(str(Path(__file__).with_name("make_propagators.py")), run_name="__main__")

"""Train the chapter's labelled variant ``propagators_gated`` of chapter 11_anchor_video_edit (issue #69, round
5): ``make_propagators_onestep.py`` run with ``--name propagators_gated`` (its docstring holds the registered
design, conditions and rule), so that ``make data NB=11_anchor_video_edit`` rebuilds the checkpoint the chapter
reads. The three seeds train one after another (about 18-20 minutes each on one core). ``--tiny``, ``--out``,
``--seeds``, ``--merge`` and ``--summary`` work as in make_propagators_onestep.py.
"""

import runpy
import sys
from pathlib import Path

if __name__ == "__main__":
    sys.argv = [sys.argv[0], *sys.argv[1:], "--name", "propagators_gated"]
    runpy.run_path(str(Path(__file__).with_name("make_propagators_onestep.py")), run_name="__main__")

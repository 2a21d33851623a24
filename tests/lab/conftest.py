"""The lab's tests import their shared helpers (labtest.py) from this folder."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

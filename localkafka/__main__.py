"""python -m localkafka up|down|status [--json] [--name N] [--port-base P]"""

import sys

from localkafka.cli import main

sys.exit(main())

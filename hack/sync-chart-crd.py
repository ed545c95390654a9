#!/usr/bin/env python3
"""Entry point for `make generate` and hack/crdgen.py; the logic is in hack/sync_chart_crd.py."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sync_chart_crd import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

#!/usr/bin/env python3
"""Entry point for `make generate` and hack/test.sh (--check); the logic is in hack/docs_gen.py."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from docs_gen import main

if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

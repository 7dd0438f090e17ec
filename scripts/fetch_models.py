#!/usr/bin/env python3
"""Download the real default models for users who have a network.

    .venv/bin/python scripts/fetch_models.py                  # all three into the app's model folder
    .venv/bin/python scripts/fetch_models.py --dest models    # into models/ at the repo root
    .venv/bin/python scripts/fetch_models.py --only embedder  # just BAAI/bge-m3
    .venv/bin/python scripts/fetch_models.py --list           # what would be fetched, and where

Qwen3-4B (Q4_K_M GGUF), BAAI/bge-m3 and BAAI/bge-reranker-v2-m3 come from the Hugging Face Hub
(or $HF_ENDPOINT / --endpoint, e.g. a mirror) with progress bars, resume of interrupted
downloads and a checksum check of every file; at the end the script prints the ``[models]``
settings lines that point the app at them. Exit status: 0 done, 1 download failed (offline,
checksum mismatch, ...), 130 interrupted. The logic lives in ``rag_desktop/app/fetch.py``, the
command line in ``rag_desktop/cli/fetch_models.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

try:
    from rag_desktop.cli.fetch_models import main
except ModuleNotFoundError:  # run from a checkout where the package is not installed
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from rag_desktop.cli.fetch_models import main

if __name__ == "__main__":
    sys.exit(main())

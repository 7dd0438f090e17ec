"""``python -m rag_desktop`` is the same as ``rag-desktop``."""

from rag_desktop.cli import main

raise SystemExit(main())

"""``scripts/fetch_models.py``: download the real default models; the work is ``app.fetch``, this prints it.

Exit status: 0 done, 1 a download failed (network, checksum mismatch, ...), 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from rag_desktop.app.config import load_settings, model_dir, settings_path
from rag_desktop.app.fetch import (
    ROLES,
    SOURCES,
    STAGING_DIR,
    FetchError,
    FetchResult,
    ModelSource,
    Role,
    fetch_model,
    list_sources,
    settings_lines,
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="fetch_models.py",
        description="Download the real default models (Qwen3-4B GGUF, BAAI/bge-m3, BAAI/bge-reranker-v2-m3) "
        "from the Hugging Face Hub, with progress, resume and checksum verification.",
    )
    p.add_argument("--dest", type=Path, default=None,
                   help="destination folder (default: the app's model folder from the settings)")
    p.add_argument("--only", action="append", choices=ROLES, metavar="{generator,embedder,reranker}",
                   help="fetch only this model (repeatable; default: all three)")
    p.add_argument("--list", action="store_true", help="show what would be fetched and where, then exit")
    p.add_argument("--endpoint", default=None,
                   help="hub URL (default: $HF_ENDPOINT or https://huggingface.co), e.g. a mirror")
    p.add_argument("--retries", type=int, default=5, help="attempts per file before giving up (default: 5)")
    p.add_argument("--xet", action="store_true",
                   help="let hf_xet download Xet-backed files (faster; an interrupted file may restart from zero)")
    return p


def main(
    argv: Sequence[str] | None = None,
    *,
    sources: Mapping[Role, ModelSource] = SOURCES,
    token: str | bool | None = None,
    cache_dir: Path | None = None,
    retry_wait: float = 2.0,
) -> int:
    """Entry point of ``scripts/fetch_models.py``: 0 on success, 1 on a download failure."""
    args = build_parser().parse_args(argv)
    dest = (args.dest if args.dest is not None else model_dir(load_settings())).expanduser().resolve()
    if args.list:
        print(list_sources(dest, sources))
        return 0
    roles = [r for r in ROLES if not args.only or r in args.only]
    done: list[FetchResult] = []
    status = 0
    try:
        for role in roles:
            done.append(fetch_model(sources[role], dest, endpoint=args.endpoint, token=token, cache_dir=cache_dir,
                                    max_attempts=max(1, args.retries), retry_wait=retry_wait,
                                    use_xet=args.xet, log=print))
    except FetchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        status = 1
    except KeyboardInterrupt:
        print(f"\ninterrupted: nothing half-written was installed; run again to resume "
              f"(partial files are under {dest / STAGING_DIR})", file=sys.stderr)
        status = 130
    if done:
        print(f"\nTo use {'it' if len(done) == 1 else 'them'}, put these lines in {settings_path()} "
              f"(or choose the paths in the app's Settings):\n")
        print(settings_lines(done), end="")
    return status

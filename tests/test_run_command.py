"""The README's run command ends in `rag-desktop gui --demo`: on a headless machine it must open
the window offscreen (not crash for want of a display) and start building the demo library."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.gui, pytest.mark.slow]


def test_gui_demo_starts_headless(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY", "QT_QPA_PLATFORM")}
    env["RAG_DESKTOP_DATA_DIR"] = str(tmp_path / "data")
    env["RAG_DESKTOP_CONFIG_DIR"] = str(tmp_path / "config")
    proc = subprocess.Popen([sys.executable, "-m", "rag_desktop", "gui", "--demo"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    demo_catalog = tmp_path / "data" / "libraries" / "demo" / "catalog.sqlite"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and not demo_catalog.exists():
        time.sleep(0.5)
    alive = proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
    assert alive, f"the app exited early:\n{err}"
    assert "offscreen" in err
    assert demo_catalog.exists(), "the first launch did not start building the demo library"

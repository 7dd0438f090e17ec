"""rag-desktop doctor / bootstrap.sh run: Qt's X11 plugin libraries, and the exact apt-get line
for the missing ones."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from rag_desktop.app.doctor import XCB_PACKAGES, apt_packages, parse_ldd, qt_platform_check, qt_xcb_plugin
from rag_desktop.cli.doctor_qt import main

# ldd's output (abridged, in its real format) on a desktop that lacks the two libraries the issue
# found missing — Qt's own error named libxcb-cursor0, which was installed.
RECORDED = """\
\tlinux-vdso.so.1 (0x00007ffd2a5f1000)
\tlibQt6XcbQpa.so.6 => /opt/app/.venv/lib/PySide6/Qt/lib/libQt6XcbQpa.so.6 (0x00007f1c2c400000)
\tlibGL.so.1 => /lib/x86_64-linux-gnu/libGL.so.1 (0x00007f1c2c379000)
\tlibxkbcommon-x11.so.0 => /lib/x86_64-linux-gnu/libxkbcommon-x11.so.0 (0x00007f1c2c36e000)
\tlibxcb-cursor.so.0 => /lib/x86_64-linux-gnu/libxcb-cursor.so.0 (0x00007f1c2c322000)
\tlibxcb-icccm.so.4 => not found
\tlibxcb-keysyms.so.1 => not found
\tlibxcb-randr.so.0 => /lib/x86_64-linux-gnu/libxcb-randr.so.0 (0x00007f1c2bfe9000)
\tlibxcb.so.1 => /lib/x86_64-linux-gnu/libxcb.so.1 (0x00007f1c2bf79000)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f1c2c9d3000)
"""


def test_recorded_not_found_output_gives_the_exact_install_command() -> None:
    resolved, missing = parse_ldd(RECORDED)
    assert missing == ["libxcb-icccm.so.4", "libxcb-keysyms.so.1"]
    assert "libxcb-cursor.so.0" in resolved and "linux-vdso.so.1" not in resolved
    check = qt_platform_check(RECORDED)
    assert not check["ready"]
    assert check["hint"] == "sudo apt-get install libxcb-icccm4 libxcb-keysyms1"
    assert "libxcb-icccm.so.4, libxcb-keysyms.so.1" in check["detail"]


def test_unknown_libraries_are_named_not_guessed() -> None:
    packages, unknown = apt_packages(["libxcb-cursor.so.0", "libfoo.so.9", "libxcb-cursor.so.0"])
    assert packages == ["libxcb-cursor0"] and unknown == ["libfoo.so.9"]
    hint = qt_platform_check("\tlibfoo.so.9 => not found\n")["hint"]
    assert "apt-file search" in hint and "libfoo.so.9" in hint


@pytest.mark.skipif(not sys.platform.startswith("linux") or shutil.which("ldd") is None, reason="needs Linux ldd")
def test_real_ldd_on_the_real_plugin() -> None:
    plugin = qt_xcb_plugin()
    assert plugin is not None and plugin.name == "libqxcb.so"
    out = subprocess.run(["ldd", str(plugin)], capture_output=True, text=True, timeout=60).stdout
    resolved, missing = parse_ldd(out)
    assert "libQt6XcbQpa.so.6" in resolved + missing
    # Every X11 helper the plugin loads on this machine has a package in the table.
    xcb = [lib for lib in resolved + missing if lib.startswith(("libxcb", "libxkbcommon", "libX11"))]
    assert xcb and all(lib in XCB_PACKAGES for lib in xcb), [lib for lib in xcb if lib not in XCB_PACKAGES]
    check = qt_platform_check()
    assert check["ready"] == (missing == []), check
    assert main(["--qt"]) == (0 if not missing else 1)

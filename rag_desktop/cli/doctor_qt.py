"""``python -m rag_desktop.cli.doctor_qt --qt``: the Qt check scripts/bootstrap.sh runs before the GUI.

The check itself is ``app.doctor.qt_platform_check`` (what ``rag-desktop doctor`` reports too);
this module only prints it. It imports no Qt and nothing heavy: it must run where Qt cannot load.
"""

from __future__ import annotations

import os
import sys

from rag_desktop.app import doctor


def main(argv: list[str] | None = None) -> int:
    """``python -m rag_desktop.cli.doctor_qt --qt``: what scripts/bootstrap.sh runs before the GUI.

    Prints nothing and returns 0 when Qt's X11 plugin can load; otherwise prints what is
    missing and the install command, and returns 1 — unless this is a Wayland session, where
    Qt may not need the X11 plugin (then it only warns).
    """
    args = sys.argv[1:] if argv is None else argv
    if args != ["--qt"]:
        print("usage: python -m rag_desktop.cli.doctor_qt --qt", file=sys.stderr)
        return 2
    check = doctor.qt_platform_check()
    if check["ready"]:
        return 0
    print(f"rag-desktop: {check['detail']}", file=sys.stderr)
    if check["hint"]:
        print(f"rag-desktop: install them with:\n    {check['hint']}", file=sys.stderr)
    if os.environ.get("WAYLAND_DISPLAY") and os.environ.get("QT_QPA_PLATFORM", "wayland").startswith("wayland"):
        print("rag-desktop: (a Wayland session: trying Qt's Wayland plugin anyway)", file=sys.stderr)
        return 0
    return 1


if __name__ == "__main__":
    raise SystemExit(main())

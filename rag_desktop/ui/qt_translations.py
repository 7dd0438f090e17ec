"""Qt's own strings (OK, Cancel, Yes, No, the file dialog …) in the UI language.

ui/i18n.py holds every string the app writes; the buttons Qt draws itself come from Qt's
translation catalogues, which PySide6 ships (qtbase_zh_CN.qm). Without them the Chinese UI's
dialogs said "OK" and "Cancel" (labels that stay English).
"""

from __future__ import annotations

import logging

from PySide6.QtCore import QCoreApplication, QLibraryInfo, QTranslator

log = logging.getLogger(__name__)

QT_LOCALES = {"zh": "zh_CN"}  # UI language → Qt catalogue suffix; English needs none
_installed: QTranslator | None = None


def apply_qt_language(lang: str) -> bool:
    """Install Qt's catalogue for ``lang`` (or remove it for English); True when one is active."""
    global _installed
    app = QCoreApplication.instance()
    if app is None:
        return False
    if _installed is not None:
        app.removeTranslator(_installed)
        _installed = None
    locale = QT_LOCALES.get(lang)
    if locale is None:
        return False
    tr = QTranslator(app)
    folder = QLibraryInfo.path(QLibraryInfo.LibraryPath.TranslationsPath)
    if not tr.load(f"qtbase_{locale}", folder):
        log.warning("Qt's %s translations are missing in %s: its own buttons stay English", locale, folder)
        return False
    app.installTranslator(tr)
    _installed = tr
    return True

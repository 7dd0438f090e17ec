"""Settings on disk: TOML in the platform's user config folder (platformdirs).

Unknown keys and wrong types are errors that name the key, so a typo in a
hand-edited file is reported instead of silently ignored. What a value may be (type,
choices, range) is the settings schema's business (``core.settings``): this module only
reads and writes the file.

The desktop app's list of known libraries (folders) and the one last open live beside the
settings in ``libraries.toml`` (:class:`LibraryList`); removing a library from the list never
touches its folder.

What the window remembers by itself (the question history, the window's geometry) is not a
setting: it lives in ``ui_state.toml`` beside the settings (:class:`UIState`), so asking a
question never rewrites ``settings.toml`` and a hand edit made while the app is open survives.
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_type_hints

import tomli_w
from platformdirs import user_config_dir, user_data_dir

from rag_desktop.core.errors import UserInputError
from rag_desktop.core.settings import SettingInfo, Settings, SettingsError, setting_info

APP_NAME = "rag-desktop"


def config_dir() -> Path:
    return Path(os.environ.get("RAG_DESKTOP_CONFIG_DIR") or user_config_dir(APP_NAME))


def data_dir() -> Path:
    return Path(os.environ.get("RAG_DESKTOP_DATA_DIR") or user_data_dir(APP_NAME))


def settings_path() -> Path:
    return config_dir() / "settings.toml"


def default_library_dir() -> Path:
    return data_dir() / "libraries" / "default"


def demo_library_dir() -> Path:
    return data_dir() / "libraries" / "demo"


def model_dir(settings: Settings) -> Path:
    """Where model files live: the setting, else $RAG_DESKTOP_MODEL_DIR, else the user data folder."""
    if settings.models.model_dir:
        return Path(settings.models.model_dir).expanduser()
    env = os.environ.get("RAG_DESKTOP_MODEL_DIR")
    return Path(env) if env else data_dir() / "models"


def _from_toml(value: Any, info: SettingInfo) -> Any:
    """TOML's whole numbers become floats where the setting is a number (``temperature = 1``).

    Everything else is checked by the one validator, ``core.settings.validate_section``,
    when the loaded settings are validated.
    """
    if info.kind in ("float", "float_or_choice") and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


# Keys that older versions wrote into settings.toml (every save writes every key): read without
# complaint and never written back. ui.recent_questions lives in ui_state.toml now
# (``load_ui_state`` migrates it); retrieval.auto_calibrate switched the model-judged calibration
# the app no longer has (docs/architecture.md, "The calibration gate").
LEGACY_SETTINGS_KEYS = frozenset({("ui", "recent_questions"), ("retrieval", "auto_calibrate")})


def settings_from_dict(data: dict[str, Any]) -> Settings:
    sections: dict[str, Any] = {}
    top_hints = get_type_hints(Settings)
    for section, values in data.items():
        if section not in top_hints:
            raise SettingsError(f"unknown settings section [{section}]")
        if not isinstance(values, dict):
            raise SettingsError(f"invalid setting {section}: expected a table")
        kwargs: dict[str, Any] = {}
        for key, value in values.items():
            if (section, key) in LEGACY_SETTINGS_KEYS:
                continue
            kwargs[key] = _from_toml(value, setting_info(section, key))  # an unknown key raises here
        sections[section] = top_hints[section](**kwargs)
    return Settings(**sections).validate()


def settings_to_dict(settings: Settings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in dataclasses.fields(settings):
        section = getattr(settings, f.name)
        out[f.name] = dataclasses.asdict(section)
    return out


def _read_toml(p: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(p.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"{p}: not valid TOML ({exc})") from exc


def load_settings(path: Path | None = None) -> Settings:
    """Read the settings file; a missing file gives the defaults (the papers' values)."""
    p = path or settings_path()
    if not p.exists():
        return Settings()
    return settings_from_dict(_read_toml(p))


def save_settings(settings: Settings, path: Path | None = None) -> Path:
    """Write atomically (temp file, then rename) so a crash never leaves half a file."""
    p = path or settings_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".toml.tmp")
    tmp.write_text(tomli_w.dumps(settings_to_dict(settings.validate())), encoding="utf-8")
    os.replace(tmp, p)
    return p


# ---------------------------------------------------------------------- known libraries


def libraries_path() -> Path:
    return config_dir() / "libraries.toml"


def new_library_dir(name: str) -> Path:
    """Where "New library…" puts a library called ``name`` (user data folder / libraries / name)."""
    clean = name.strip()
    if not clean or clean in (".", "..") or any(c in clean for c in '/\\:*?"<>|') or clean != clean.strip("."):
        raise UserInputError(f"{name!r} cannot be a library name: use letters, digits, spaces, - or _")
    return data_dir() / "libraries" / clean


def _norm(path: str | Path) -> str:
    return str(Path(path).expanduser().resolve())


@dataclass(frozen=True)
class LibraryList:
    """The libraries the app knows (folders, in the order added) and the one open last."""

    libraries: tuple[str, ...] = ()
    current: str = ""

    def with_library(self, path: str | Path, make_current: bool = True) -> LibraryList:
        p = _norm(path)
        libs = self.libraries if p in self.libraries else (*self.libraries, p)
        return LibraryList(libs, p if make_current else self.current)

    def without(self, path: str | Path) -> LibraryList:
        """The list without ``path`` (its folder is left as it is); the current one cannot be removed."""
        p = _norm(path)
        if p == self.current:
            raise UserInputError("the open library cannot be removed from the list: switch to another one first")
        return LibraryList(tuple(x for x in self.libraries if x != p), self.current)


def load_libraries(path: Path | None = None) -> LibraryList:
    """Read the list; a missing file gives an empty list. A broken file raises SettingsError naming the key."""
    p = path or libraries_path()
    if not p.exists():
        return LibraryList()
    data = _read_toml(p)
    unknown = sorted(set(data) - {"libraries", "current"})
    if unknown:
        raise SettingsError(f"{p}: unknown key {unknown[0]}")
    libs = data.get("libraries", [])
    if not isinstance(libs, list) or not all(isinstance(x, str) and x for x in libs):
        raise SettingsError(f"{p}: invalid key libraries: expected a list of folder paths")
    current = data.get("current", "")
    if not isinstance(current, str):
        raise SettingsError(f"{p}: invalid key current: expected a folder path")
    seen: list[str] = []
    for x in libs:
        if _norm(x) not in seen:
            seen.append(_norm(x))
    cur = _norm(current) if current else ""
    if cur and cur not in seen:
        seen.append(cur)
    return LibraryList(tuple(seen), cur)


def save_libraries(lst: LibraryList, path: Path | None = None) -> Path:
    """Write atomically, like the settings."""
    p = path or libraries_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".toml.tmp")
    tmp.write_text(tomli_w.dumps({"current": lst.current, "libraries": list(lst.libraries)}), encoding="utf-8")
    os.replace(tmp, p)
    return p


# ---------------------------------------------------------------------- window state


def ui_state_path() -> Path:
    return config_dir() / "ui_state.toml"


MAX_RECENT_QUESTIONS = 20


@dataclass(frozen=True)
class UIState:
    """What the window remembers between runs; written by the app, not meant for editing."""

    recent_questions: tuple[str, ...] = ()
    # QMainWindow.saveGeometry() as base64 (Qt's own format: size, position, screen, maximised).
    window_geometry: str = ""
    # The "CF-RAG" switch beside "Generate answers": CF-RAG takes minutes on a CPU, so a person
    # may want the answers without it; remembered like the window's size.
    run_cfrag: bool = True

    def with_question(self, question: str) -> UIState:
        """``question`` first, then the older ones without it, at most MAX_RECENT_QUESTIONS."""
        recent = [question, *(q for q in self.recent_questions if q != question)][:MAX_RECENT_QUESTIONS]
        return dataclasses.replace(self, recent_questions=tuple(recent))


def _legacy_recent_questions(settings_file: Path) -> tuple[str, ...]:
    """The history an older version kept in settings.toml ([ui] recent_questions), if any."""
    if not settings_file.is_file():
        return ()
    try:
        ui = _read_toml(settings_file).get("ui", {})
    except (SettingsError, OSError):
        return ()  # a broken settings file is reported by load_settings, not here
    old = ui.get("recent_questions", []) if isinstance(ui, dict) else []
    if not isinstance(old, list):
        return ()
    return tuple(q for q in old if isinstance(q, str) and q.strip())[:MAX_RECENT_QUESTIONS]


def load_ui_state(path: Path | None = None, settings_file: Path | None = None) -> UIState:
    """Read the window state. With no state file yet, an old history in the settings file
    (``settings_file``, default the settings path) is taken over. A broken file raises
    SettingsError naming the file and the key."""
    p = path or ui_state_path()
    if not p.exists():
        return UIState(_legacy_recent_questions(settings_file or p.with_name("settings.toml")))
    data = _read_toml(p)
    unknown = sorted(set(data) - {f.name for f in dataclasses.fields(UIState)})
    if unknown:
        raise SettingsError(f"{p}: unknown key {unknown[0]}")
    recent = data.get("recent_questions", [])
    if not isinstance(recent, list) or not all(isinstance(q, str) for q in recent):
        raise SettingsError(f"{p}: invalid key recent_questions: expected a list of questions")
    geometry = data.get("window_geometry", "")
    if not isinstance(geometry, str):
        raise SettingsError(f"{p}: invalid key window_geometry: expected text")
    run_cfrag = data.get("run_cfrag", True)
    if not isinstance(run_cfrag, bool):
        raise SettingsError(f"{p}: invalid key run_cfrag: expected true or false")
    return UIState(tuple(recent)[:MAX_RECENT_QUESTIONS], geometry, run_cfrag)


def save_ui_state(state: UIState, path: Path | None = None) -> Path:
    """Write atomically, like the settings."""
    p = path or ui_state_path()
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".toml.tmp")
    tmp.write_text(tomli_w.dumps({"recent_questions": list(state.recent_questions),
                                  "window_geometry": state.window_geometry, "run_cfrag": state.run_cfrag}),
                   encoding="utf-8")
    os.replace(tmp, p)
    return p

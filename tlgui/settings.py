"""What the window remembers between sessions (an INI file through QSettings), and how a saved
set of parameters is migrated when the shipped defaults changed.

Keys: ``params/json`` with ``params/defaults_json`` and ``params/defaults_fingerprint`` (the
defaults they were chosen against), ``params/dropped_json`` (what a migration threw away),
``layers/<name>/visible|opacity``, ``layers/posterior_mode``, ``recent``, ``dirs/page``,
``dirs/export``, ``window/geometry``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from PySide6.QtCore import QSettings

from engine.params import ParameterError, Parameters

MAX_RECENT = 10


def app_settings() -> QSettings:
    """The application's settings, always an INI file, so that its folder can hold autosaves."""
    return QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, "tlgui", "tlgui")


def settings_folder() -> Path:
    return Path(app_settings().fileName()).resolve().parent


def autosave_dir() -> Path:
    """Where each page's edited initial lines are autosaved."""
    return settings_folder() / "tlgui-edits"


def results_dir() -> Path:
    """Where a document's outputs go when the folder opened held none (one folder each)."""
    return settings_folder() / "tlgui-results"


def exports_dir() -> Path:
    """Where the export dialogs start when the user has chosen no folder yet: never the folder
    of the input pages (a colour PNG beside the scans would be taken for a page)."""
    return Path.home() / "tlgui-exports"


def defaults_fingerprint() -> str:
    """A hash of the shipped default parameters: saved with the user's parameters, so that
    a new version with other defaults can tell that they were chosen against the old ones."""
    return hashlib.sha256(Parameters().to_json().encode("utf-8")).hexdigest()[:16]


def _json_dict(text: object) -> dict[str, Any] | None:
    try:
        data = json.loads(str(text)) if text else None
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) else None


def stale_parameters(saved: dict[str, Any], old_defaults: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """What restoring the new defaults over ``saved`` throws away: the saved values that were
    the user's own (they differ from the defaults of their time, or, when those are unknown,
    from today's) as ``name=value``, and the defaults that changed as ``name old → new``
    (``new name = value`` for a parameter added since, ``name removed`` for one gone)."""
    new_defaults = json.loads(Parameters().to_json())
    basis = old_defaults if old_defaults is not None else new_defaults
    dropped = [f"{k}={saved[k]}" for k in sorted(saved) if k in basis and saved[k] != basis[k]
               and saved[k] != new_defaults.get(k)]
    if old_defaults is None:
        return dropped, []
    changed = []
    for k in sorted(set(old_defaults) | set(new_defaults)):
        if k not in old_defaults:
            changed.append(f"new {k} = {new_defaults[k]}")
        elif k not in new_defaults:
            changed.append(f"{k} removed")
        elif old_defaults[k] != new_defaults[k]:
            changed.append(f"{k} {old_defaults[k]} → {new_defaults[k]}")
    return dropped, changed


class WindowSettings:
    """The window's view of its QSettings: parameters (with their migration), layers, recent
    files, last folders and the window's geometry."""

    def __init__(self, settings: QSettings | None = None) -> None:
        self.qsettings = settings or app_settings()

    def value(self, key: str, default: Any = None) -> Any:
        return self.qsettings.value(key, default)

    def set_value(self, key: str, value: Any) -> None:
        self.qsettings.setValue(key, value)

    def sync(self) -> None:
        self.qsettings.sync()

    # --- parameters ------------------------------------------------------------------------
    def restore_params(self) -> tuple[Parameters | None, str]:
        """The parameters of the last session and a warning to show (empty when none).

        When the shipped defaults changed since they were saved: the new defaults, and a note
        of which remembered values were dropped (an old default saved with the rest must not
        pass for the user's choice); the saved text is kept under ``params/dropped_json``."""
        text = self.value("params/json")
        if not text:
            return None, ""
        try:
            params = Parameters.from_json(str(text))
        except ParameterError as exc:
            return None, f"Saved parameters ignored: {exc}"
        if self.value("params/defaults_fingerprint") == defaults_fingerprint():
            return params, ""
        saved = json.loads(str(text))
        dropped, changed = stale_parameters(saved, _json_dict(self.value("params/defaults_json")))
        self.set_value("params/dropped_json", str(text))
        parts = ["The default parameters changed since your parameters were saved"
                 + (f" ({', '.join(changed)})" if changed else "") + ": the new defaults are in use."]
        if dropped:
            parts.append(f"Remembered values dropped: {', '.join(dropped)}; re-enter them in the "
                         "Parameters panel if you still want them.")
        return Parameters(), " ".join(parts)

    def save_params(self, params: Parameters) -> None:
        """The parameters, with the defaults they were chosen against (see restore_params)."""
        self.set_value("params/json", params.to_json())
        self.set_value("params/defaults_json", Parameters().to_json())
        self.set_value("params/defaults_fingerprint", defaults_fingerprint())

    # --- layers ----------------------------------------------------------------------------
    def layer(self, name: str) -> tuple[bool | None, int | None]:
        """A layer's remembered switch and opacity (percent), None where none is saved."""
        visible = self.value(f"layers/{name}/visible")
        opacity = self.value(f"layers/{name}/opacity")
        return (None if visible is None else str(visible).lower() in ("true", "1"),
                None if opacity is None else int(opacity))

    def save_layer(self, name: str, visible: bool | None = None, opacity: float | None = None) -> None:
        if visible is not None:
            self.set_value(f"layers/{name}/visible", visible)
        if opacity is not None:
            self.set_value(f"layers/{name}/opacity", int(round(opacity * 100)))

    # --- recent files ----------------------------------------------------------------------
    def recent_files(self) -> list[str]:
        value = self.value("recent", [])
        if isinstance(value, str):
            value = [value]
        return [str(v) for v in (value or [])]

    def add_recent(self, path: str) -> None:
        recent = [path] + [p for p in self.recent_files() if p != path]
        self.set_value("recent", recent[:MAX_RECENT])

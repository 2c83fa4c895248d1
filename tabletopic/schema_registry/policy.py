"""Compatibility levels and modes as stored per subject and globally (``/config``, ``/mode``)."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from sqlalchemy.engine import Connection, Engine

from tabletopic.schema_registry import db
from tabletopic.schema_registry.compatibility import CompatibilityLevel
from tabletopic.schema_registry.errors import (
    ErrorCode,
    RegistryError,
    level_not_configured,
    mode_not_configured,
    subject_not_found,
)
from tabletopic.schema_registry.transactions import RegistryDatabase


class Mode(StrEnum):
    READWRITE = "READWRITE"
    READONLY = "READONLY"
    READONLY_OVERRIDE = "READONLY_OVERRIDE"
    IMPORT = "IMPORT"


def _effective(conn: Connection, setting: db.SubjectSetting, subject: str) -> str | None:
    """The value in force for ``subject``: its own, else the global one."""
    return setting.effective(conn, subject)


def _configured(
    conn: Connection,
    setting: db.SubjectSetting,
    subject: str | None,
    default_to_global: bool,
    not_configured: Callable[[str], RegistryError],
) -> str | None:
    """What ``GET /config`` and ``GET /mode`` answer from: the global value when no subject is named;
    otherwise the subject's own, or the global one if it has none and ``default_to_global`` is set.

    Raises:
        RegistryError: ``not_configured(subject)`` for a subject without a value of its own.
    """
    if subject is not None:
        raw = setting.get(conn, subject)
        if raw is not None:
            return raw
        if not default_to_global:
            raise not_configured(subject)
    return setting.get(conn, db.GLOBAL)


class PolicyStore(RegistryDatabase):
    """Reads and writes the level and mode rows; the registry consults them on every write.

    Args:
        default_level: the global level until one is stored (``schema.registry.compatibility.level``).
    """

    def __init__(
        self,
        engine: Engine,
        read_engine: Engine | None = None,
        default_level: CompatibilityLevel = CompatibilityLevel.BACKWARD,
        write_engine: Engine | None = None,
    ) -> None:
        super().__init__(engine, read_engine, write_engine)
        self.default_level = default_level

    def _as_level(self, raw: str | None) -> CompatibilityLevel:
        return CompatibilityLevel.parse(raw) or self.default_level

    @staticmethod
    def _as_mode(raw: str | None) -> Mode:
        return Mode(raw) if raw else Mode.READWRITE

    def _mode(self, conn: Connection, subject: str) -> Mode:
        return self._as_mode(_effective(conn, db.modes, subject))

    def _writable(self, conn: Connection, subject: str) -> Mode:
        return self._check_writable(self._mode(conn, subject), subject)

    @staticmethod
    def _check_writable(mode: Mode, subject: str) -> Mode:
        if mode in (Mode.READONLY, Mode.READONLY_OVERRIDE):
            raise RegistryError(ErrorCode.OPERATION_NOT_PERMITTED, f"Subject {subject} is in read-only mode")
        return mode

    def _level(self, conn: Connection, subject: str) -> CompatibilityLevel:
        return self._as_level(_effective(conn, db.compatibility, subject))

    # --- config ------------------------------------------------------------------------------------

    def get_level(self, subject: str | None = None, default_to_global: bool = False) -> CompatibilityLevel:
        return self._read(
            lambda conn: self._as_level(
                _configured(conn, db.compatibility, subject, default_to_global, level_not_configured)
            )
        )

    def set_level(self, subject: str | None, raw: object) -> CompatibilityLevel:
        level = CompatibilityLevel.parse(raw)
        if level is None:
            raise RegistryError(
                ErrorCode.INVALID_COMPATIBILITY_LEVEL,
                "Invalid compatibility level. Valid values are none, backward, forward, full, "
                "backward_transitive, forward_transitive, and full_transitive",
            )
        self._write(lambda conn: db.compatibility.put(conn, subject or db.GLOBAL, level.value))
        return level

    def delete_level(self, subject: str | None) -> CompatibilityLevel:
        """Forget a subject's level (or reset the global one); answer the level it had."""

        def run(conn: Connection) -> CompatibilityLevel:
            key = subject or db.GLOBAL
            raw = db.compatibility.get(conn, key)
            if raw is None and subject is not None:
                if not db.versions(conn, subject):
                    raise subject_not_found(subject)
                raise level_not_configured(subject)
            db.compatibility.drop(conn, key)
            return self._as_level(raw)

        return self._write(run)

    # --- mode --------------------------------------------------------------------------------------

    def get_mode(self, subject: str | None = None, default_to_global: bool = False) -> Mode:
        return self._read(
            lambda conn: self._as_mode(
                _configured(conn, db.modes, subject, default_to_global, mode_not_configured)
            )
        )

    def set_mode(self, subject: str | None, raw: object, force: bool = False) -> Mode:
        try:
            mode = Mode(str(raw).strip().upper()) if isinstance(raw, str) else None
        except ValueError:
            mode = None
        if mode is None:
            raise RegistryError(
                ErrorCode.INVALID_MODE,
                "Invalid mode. Valid values are READWRITE, READONLY, READONLY_OVERRIDE and IMPORT",
            )

        def run(conn: Connection) -> Mode:
            if mode is Mode.IMPORT and not force:
                existing = db.versions(conn, subject) if subject else db.all_versions(conn)
                if existing:
                    raise RegistryError(
                        ErrorCode.OPERATION_NOT_PERMITTED,
                        "Cannot import since found existing subjects",
                    )
            db.modes.put(conn, subject or db.GLOBAL, mode.value)
            return mode

        return self._write(run)

    def delete_mode(self, subject: str) -> Mode:
        def run(conn: Connection) -> Mode:
            raw = db.modes.get(conn, subject)
            if raw is None:
                raise mode_not_configured(subject)
            db.modes.drop(conn, subject)
            return Mode(raw)

        return self._write(run)

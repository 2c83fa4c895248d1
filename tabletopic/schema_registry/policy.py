"""Compatibility levels and modes as stored per subject and globally (``/config``, ``/mode``)."""

from __future__ import annotations

from enum import StrEnum

from sqlalchemy.engine import Connection, Engine

from tabletopic.schema_registry import db
from tabletopic.schema_registry.compatibility import CompatibilityLevel
from tabletopic.schema_registry.errors import ErrorCode, RegistryError, subject_not_found
from tabletopic.schema_registry.transactions import RegistryDatabase


class Mode(StrEnum):
    READWRITE = "READWRITE"
    READONLY = "READONLY"
    READONLY_OVERRIDE = "READONLY_OVERRIDE"
    IMPORT = "IMPORT"


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
    ) -> None:
        super().__init__(engine, read_engine)
        self.default_level = default_level

    def _mode(self, conn: Connection, subject: str) -> Mode:
        raw = db.get_mode(conn, subject) or db.get_mode(conn, db.GLOBAL)
        return Mode(raw) if raw else Mode.READWRITE

    def _writable(self, conn: Connection, subject: str) -> Mode:
        mode = self._mode(conn, subject)
        if mode in (Mode.READONLY, Mode.READONLY_OVERRIDE):
            raise RegistryError(ErrorCode.OPERATION_NOT_PERMITTED, f"Subject {subject} is in read-only mode")
        return mode

    def _level(self, conn: Connection, subject: str) -> CompatibilityLevel:
        raw = db.get_compatibility(conn, subject) or db.get_compatibility(conn, db.GLOBAL)
        return CompatibilityLevel.parse(raw) or self.default_level

    # --- config ------------------------------------------------------------------------------------

    def get_level(self, subject: str | None = None, default_to_global: bool = False) -> CompatibilityLevel:
        def run(conn: Connection) -> CompatibilityLevel:
            if subject is None:
                return self._level(conn, db.GLOBAL)
            raw = db.get_compatibility(conn, subject)
            if raw is None:
                if default_to_global:
                    return self._level(conn, db.GLOBAL)
                raise RegistryError(
                    ErrorCode.SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
                    f"Subject '{subject}' does not have subject-level compatibility configured",
                )
            return CompatibilityLevel.parse(raw) or self.default_level

        return self._read(run)

    def set_level(self, subject: str | None, raw: object) -> CompatibilityLevel:
        level = CompatibilityLevel.parse(raw)
        if level is None:
            raise RegistryError(
                ErrorCode.INVALID_COMPATIBILITY_LEVEL,
                "Invalid compatibility level. Valid values are none, backward, forward, full, "
                "backward_transitive, forward_transitive, and full_transitive",
            )
        self._write(lambda conn: db.put_compatibility(conn, subject or db.GLOBAL, level.value))
        return level

    def delete_level(self, subject: str | None) -> CompatibilityLevel:
        """Forget a subject's level (or reset the global one); answer the level it had."""

        def run(conn: Connection) -> CompatibilityLevel:
            key = subject or db.GLOBAL
            raw = db.get_compatibility(conn, key)
            if raw is None and subject is not None:
                if not db.versions(conn, subject):
                    raise subject_not_found(subject)
                raise RegistryError(
                    ErrorCode.SUBJECT_COMPATIBILITY_NOT_CONFIGURED,
                    f"Subject '{subject}' does not have subject-level compatibility configured",
                )
            db.drop_compatibility(conn, key)
            return CompatibilityLevel.parse(raw) or self.default_level

        return self._write(run)

    # --- mode --------------------------------------------------------------------------------------

    def get_mode(self, subject: str | None = None, default_to_global: bool = False) -> Mode:
        def run(conn: Connection) -> Mode:
            if subject is None:
                return self._mode(conn, db.GLOBAL)
            raw = db.get_mode(conn, subject)
            if raw is None:
                if default_to_global:
                    return self._mode(conn, db.GLOBAL)
                raise RegistryError(
                    ErrorCode.SUBJECT_MODE_NOT_CONFIGURED,
                    f"Subject '{subject}' does not have subject-level mode configured",
                )
            return Mode(raw)

        return self._read(run)

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
            db.put_mode(conn, subject or db.GLOBAL, mode.value)
            return mode

        return self._write(run)

    def delete_mode(self, subject: str) -> Mode:
        def run(conn: Connection) -> Mode:
            raw = db.get_mode(conn, subject)
            if raw is None:
                raise RegistryError(
                    ErrorCode.SUBJECT_MODE_NOT_CONFIGURED,
                    f"Subject '{subject}' does not have subject-level mode configured",
                )
            db.drop_mode(conn, subject)
            return Mode(raw)

        return self._write(run)

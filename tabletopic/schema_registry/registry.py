"""Confluent's registry semantics over :mod:`.db`: registration, lookups, compatibility and
deletes (levels and modes live in :mod:`.policy`, transactions in :mod:`.transactions`).

Synchronous on purpose: every call is a short database transaction, and FastAPI runs plain ``def``
endpoints in its thread pool, so the event loop (shared with the broker) never waits on the DB.
Nothing mutable is cached here because several nodes may serve one registry database; only parsed
schemas (immutable per id) are kept.
"""

from __future__ import annotations

import base64
import dataclasses
from collections.abc import Callable, Sequence

from sqlalchemy.engine import Connection, Engine

from tabletopic.schema_registry import db
from tabletopic.schema_registry.compatibility import (
    CompatibilityFailure,
    CompatibilityLevel,
    PreviousSchema,
)
from tabletopic.schema_registry.compatibility import check as check_levels
from tabletopic.schema_registry.contexts import (
    DEFAULT_CONTEXT,
    context_of,
    public_id,
    stored_key,
)
from tabletopic.schema_registry.contracts import properties_of
from tabletopic.schema_registry.db import SchemaRow, VersionRow
from tabletopic.schema_registry.errors import (
    ErrorCode,
    RegistryError,
    invalid_schema,
    schema_not_found,
    subject_not_found,
    version_not_found,
)
from tabletopic.schema_registry.formats.base import InvalidSchema, ParsedSchema, SchemaReference
from tabletopic.schema_registry.formats.loader import get_format
from tabletopic.schema_registry.lookup import RegisteredSchema, SchemaNotFound
from tabletopic.schema_registry.lru import LRU
from tabletopic.schema_registry.model import (
    CACHEABLE_TEXT,
    LATEST,
    Candidate,
    SchemaSubmission,
    SubjectVersion,
    fingerprint,
    guid_prefix,
    has_control_character,
)
from tabletopic.schema_registry.policy import Mode, PolicyStore


class SchemaRegistry(PolicyStore):
    """The registry: Confluent's rules over the metadata database.

    Args:
        engine: the metadata database (already migrated, see :func:`.opening.build_registry`).
        default_level: global compatibility until one is stored.
        parsed_cache_size: parsed schemas kept for compatibility checks.
    """

    def __init__(
        self,
        engine: Engine,
        default_level: CompatibilityLevel = CompatibilityLevel.BACKWARD,
        parsed_cache_size: int = 2000,
        on_register: Callable[[], None] | None = None,
        read_engine: Engine | None = None,
        write_engine: Engine | None = None,
    ) -> None:
        super().__init__(engine, read_engine, default_level, write_engine)
        self._parsed: LRU[int, ParsedSchema] = LRU(parsed_cache_size)
        self._candidates: LRU[tuple[str, str, bool, tuple[tuple[str, str], ...]], tuple[ParsedSchema, str]]
        self._candidates = LRU(parsed_cache_size)
        self._on_register = on_register
        self._checks: LRU[
            tuple[str, CompatibilityLevel, tuple[tuple[int, int], ...]], tuple[CompatibilityFailure, ...]
        ]
        self._checks = LRU(parsed_cache_size)
        self._rows: LRU[int, SchemaRow] = LRU(parsed_cache_size)
        # Bumped after every permanent delete on this node: caches of answers by id (which only a
        # permanent delete can invalidate) drop everything when it moves.
        self.removals = 0

    # --- parsing -----------------------------------------------------------------------------------

    def _resolve(self, conn: Connection, references: Sequence[SchemaReference]) -> dict[str, str]:
        """Reference name -> schema text, transitively, dependencies first (what parsers need)."""
        resolved: dict[str, str] = {}

        def visit(ref: SchemaReference, path: tuple[str, ...]) -> None:
            if ref.name in resolved:
                return
            if ref.name in path:
                raise invalid_schema(f"circular reference through {ref.name}")
            if has_control_character(ref.subject):  # no subject has one: the database is not asked
                match = None
            elif ref.version == LATEST:
                match = db.latest_version(conn, ref.subject)
            else:
                match = db.version_row(conn, ref.subject, ref.version)
            row = None if match is None else db.schema_by_id(conn, match.schema_id)
            if row is None:
                raise invalid_schema(
                    f"reference '{ref.name}' points to subject '{ref.subject}' version {ref.version}, "
                    "which does not exist"
                )
            for inner in row.references:
                visit(inner, (*path, ref.name))
            resolved[ref.name] = row.schema

        for ref in references:
            visit(ref, ())
        return resolved

    def _parse_row(self, conn: Connection, row: SchemaRow) -> ParsedSchema:
        """A stored schema, parsed (cached by id: an id's text never changes).

        Raises:
            RegistryError: 42201 when a stored schema no longer parses here (for example its
                format's module is missing on this node).
        """
        cached = self._parsed.get(row.id)
        if cached is not None:
            return cached
        try:
            parsed = get_format(row.schema_type).parse(row.schema, self._resolve(conn, row.references))
        except InvalidSchema as exc:
            raise invalid_schema(f"stored schema {row.id} cannot be parsed on this node: {exc}") from exc
        if len(row.schema) <= CACHEABLE_TEXT:
            self._parsed.put(row.id, parsed)
        return parsed

    def parse_candidate(self, conn: Connection, submission: SchemaSubmission) -> Candidate:
        """Parse a schema from a request. Raises 42201 for any problem with it."""
        return self._parse_submission(conn, submission)[0]

    def _parse_submission(
        self, conn: Connection | None, submission: SchemaSubmission
    ) -> tuple[Candidate, bool]:
        """The candidate, and whether its text was new to this node (parsed now, not cached).
        ``conn`` may be ``None`` for a submission without references."""
        text, normalize = submission.text, submission.normalize
        if not isinstance(text, str) or not text.strip():
            raise invalid_schema("empty schema")
        if "\x00" in text:
            raise invalid_schema("schemas must not contain NUL characters")
        try:
            fmt = get_format(submission.schema_type)
            resolved: dict[str, str] = {}
            if submission.references:
                assert conn is not None, "references are resolved in a transaction"
                resolved = self._resolve(conn, submission.references)
            # Serializers re-send the same schemas over and over; the parse is the costly part and
            # depends only on the text, the flag and the referenced texts.
            key = (fmt.schema_type, text, normalize, tuple(resolved.items()))
            cached = self._candidates.get(key)
            fresh = cached is None
            if cached is None:
                parsed = fmt.parse(text, resolved)
                stored = parsed.normalized() if normalize else parsed.canonical()
                if normalize:
                    parsed = fmt.parse(stored, resolved)
                cached = (parsed, stored)
                if len(text) <= CACHEABLE_TEXT:
                    self._candidates.put(key, cached)
        except InvalidSchema as exc:
            raise invalid_schema(str(exc)) from exc
        except RecursionError as exc:
            raise invalid_schema("schema nests too deeply") from exc
        candidate = Candidate(
            fmt.schema_type, fmt, cached[0], cached[1], submission.references, submission.contract
        )
        return candidate, fresh

    # --- registration ------------------------------------------------------------------------------

    def register(
        self,
        subject: str,
        submission: SchemaSubmission,
        schema_id: int | None = None,
        version: int | None = None,
    ) -> tuple[int, int]:
        """Register a schema under ``subject``; return ``(id, version)``. Idempotent: the same schema
        again answers its existing id and version. ``schema_id`` and ``version`` ask for a given id
        and version (IMPORT mode; in other modes an id is refused and a version must be the next)."""
        normalize = submission.normalize

        plain = schema_id is None and version is None

        def known_version(conn: Connection, candidate: Candidate) -> VersionRow | None:
            # Serializers re-register on every start: a schema the subject already holds is
            # answered from a read, without taking the registry-wide write lock.
            if plain and self._mode(conn, subject) in (Mode.READWRITE, Mode.IMPORT):
                return self._find(conn, subject, candidate, normalize)
            return None

        def prepare(conn: Connection) -> tuple[Candidate, VersionRow | None]:
            candidate = self.parse_candidate(conn, submission)
            return candidate, known_version(conn, candidate)

        if submission.references:
            candidate, known = self._read(prepare)
        else:
            # No references: parsed outside any transaction. A text this node has never parsed is
            # most likely a new schema, so the read that would find a repeat is skipped (the write
            # transaction below finds repeats all the same).
            candidate, fresh = self._parse_submission(None, submission)
            known = None if fresh else self._read(lambda conn: known_version(conn, candidate))
        if known is not None:
            if self._on_register is not None:
                self._on_register()
            return public_id(known.schema_id), known.version

        def run(conn: Connection) -> tuple[int, int, SchemaRow | None]:
            raw_mode, raw_level = db.mode_and_level(conn, subject)
            mode = self._check_writable(self._as_mode(raw_mode), subject)
            # The references were resolved before this transaction; they must still be there.
            self._resolve(conn, candidate.references)
            if mode is not Mode.IMPORT and schema_id is not None and schema_id >= 0:
                raise RegistryError(
                    ErrorCode.OPERATION_NOT_PERMITTED, f"Subject {subject} is not in import mode"
                )
            # Only the rows the rules need: the newest version (for the next number) and the
            # newest live one (contract, non-transitive check); all live ones only when transitive.
            newest = db.latest_version(conn, subject)
            latest_live = (
                newest
                if newest is None or not newest.deleted
                else db.latest_version(conn, subject, include_deleted=False)
            )
            cand = self._inherit_contract(conn, candidate, latest_live)
            existing = self._find(conn, subject, cand, normalize)
            if existing is not None and self._same_registration(existing, schema_id, version):
                return existing.schema_id, existing.version, None
            if mode is not Mode.IMPORT and latest_live is not None:
                level = self._as_level(raw_level)
                live = (
                    db.versions(conn, subject, include_deleted=False) if level.transitive else [latest_live]
                )
                failures = self._failures(conn, subject, cand, live, level)
                if failures:
                    raise RegistryError(
                        ErrorCode.INCOMPATIBLE_SCHEMA,
                        "Schema being registered is incompatible with an earlier schema for subject "
                        f'"{subject}", details: [{", ".join(f.describe() for f in failures)}]',
                    )
            number = db.context_number(conn, context_of(subject), create=True)
            assert number is not None
            new_id = self._assign_id(conn, cand, schema_id if mode is Mode.IMPORT else None, number)
            new_version = (newest.version + 1) if newest is not None else 1
            if version is not None and version >= 1:
                if db.version_row(conn, subject, version) is not None:
                    raise RegistryError(
                        ErrorCode.OPERATION_NOT_PERMITTED,
                        f"Version {version} of subject {subject} already exists with another schema",
                    )
                if mode is not Mode.IMPORT and version != new_version:
                    raise RegistryError(
                        ErrorCode.OPERATION_NOT_PERMITTED,
                        f"Version {version} is not one more than the latest version of subject {subject}",
                    )
                new_version = version
            db.insert_version(conn, subject, new_version, new_id)
            # The id's row has this content (new, or found by this very fingerprint).
            return new_id, new_version, self._row(new_id, cand)

        new_id, new_version, stored = self._write_grouped(run)
        # The next registration checks against this version: keep its parse (the stored text is
        # candidate.text, so the parse is the same one _parse_row would make) and its row.
        if len(candidate.text) <= CACHEABLE_TEXT:
            if self._parsed.get(new_id) is None:
                self._parsed.put(new_id, candidate.parsed)
            if stored is not None:
                self._rows.put(new_id, stored)
        if self._on_register is not None:
            self._on_register()
        return public_id(new_id), new_version

    def _stored(self, conn: Connection, schema_id: int) -> SchemaRow | None:
        """The schema row of an id a version row of this transaction names (an id's row never
        changes, and a version naming it keeps it from being deleted, so the cache cannot be stale)."""
        row = self._rows.get(schema_id)
        if row is None:
            row = db.schema_by_id(conn, schema_id)
            if row is not None and len(row.schema) <= CACHEABLE_TEXT:
                self._rows.put(schema_id, row)
        return row

    def _inherit_contract(
        self, conn: Connection, candidate: Candidate, latest_live: VersionRow | None
    ) -> Candidate:
        """A schema registered without ``metadata`` or ``ruleSet`` keeps the latest version's, as
        Confluent does, so a serializer that registers the bare schema does not drop the contract."""
        if candidate.contract or latest_live is None:
            return candidate
        latest = self._stored(conn, latest_live.schema_id)
        if latest is None or not latest.contract:
            return candidate
        return dataclasses.replace(candidate, contract=latest.contract)

    @staticmethod
    def _same_registration(existing: VersionRow, schema_id: int | None, version: int | None) -> bool:
        """A repeat of ``existing``: no id/version asked for, or the ones it already has."""
        if version is not None and version != existing.version:
            return False
        return schema_id is None or schema_id < 0 or schema_id == public_id(existing.schema_id)

    def _find(
        self,
        conn: Connection,
        subject: str,
        candidate: Candidate,
        normalize: bool,
        include_deleted: bool = False,
    ) -> VersionRow | None:
        """The newest version of ``subject`` holding the candidate: by fingerprint of the stored text
        (one indexed query), and with ``normalize`` also by normalized form, so cosmetic variants of
        a schema registered without normalization find it."""
        # Asked without a contract, the schema registered with one still is this schema.
        bare = (
            None
            if candidate.contract
            else fingerprint(candidate.schema_type, candidate.text, candidate.references)
        )
        found = db.version_with_fingerprint(conn, subject, candidate.fingerprint, include_deleted, bare)
        if found is not None or not normalize:
            return found
        for row in reversed(db.versions(conn, subject, include_deleted)):
            stored = db.schema_by_id(conn, row.schema_id)
            if stored is None or stored.schema_type != candidate.schema_type:
                continue
            if stored.references != candidate.references or stored.contract != candidate.contract:
                continue
            try:
                if self._parse_row(conn, stored).normalized() == candidate.text:
                    return row
            except RegistryError:  # a stored schema this node cannot parse is not a match
                continue
        return None

    def _assign_id(self, conn: Connection, candidate: Candidate, wanted: int | None, number: int) -> int:
        """The stored key of the candidate in the context numbered ``number``: the one it already
        has there, the one IMPORT asks for, or the context's next id."""
        same = db.schema_by_fingerprint(conn, candidate.fingerprint, number)
        if wanted is not None and wanted >= 0:
            key = stored_key(number, wanted)
            taken = db.schema_by_id(conn, key)
            if taken is not None:
                taken_print = fingerprint(taken.schema_type, taken.schema, taken.references, taken.contract)
                if taken_print != candidate.fingerprint:
                    raise RegistryError(
                        ErrorCode.OPERATION_NOT_PERMITTED,
                        f"Overwrite new schema with id {wanted} is not permitted.",
                    )
                return key
            db.insert_schema(conn, self._row(key, candidate), candidate.fingerprint)
            db.raise_ids_to(conn, wanted, number)
            return key
        if same is not None:
            return same.id
        new_id = stored_key(number, db.next_id(conn, number))
        db.insert_schema(conn, self._row(new_id, candidate), candidate.fingerprint)
        return new_id

    @staticmethod
    def _row(schema_id: int, candidate: Candidate) -> SchemaRow:
        return SchemaRow(
            schema_id, candidate.schema_type, candidate.text, candidate.references, candidate.contract
        )

    def _failures(
        self,
        conn: Connection,
        subject: str,
        candidate: Candidate,
        against: Sequence[VersionRow],
        level: CompatibilityLevel | None = None,
    ) -> list[CompatibilityFailure]:
        level = level or self._level(conn, subject)
        if level is CompatibilityLevel.NONE or not against:
            return []
        targets = against if level.transitive else against[-1:]
        # Schemas per id and candidates per fingerprint never change, so neither does the answer.
        key = (candidate.fingerprint, level, tuple((r.version, r.schema_id) for r in targets))
        known = self._checks.get(key)
        if known is not None:
            return list(known)
        previous = []
        for row in targets:
            parsed = self._parsed.get(row.schema_id)
            if parsed is None:
                stored = self._stored(conn, row.schema_id)
                parsed = None if stored is None else self._parse_row(conn, stored)
            if parsed is not None:
                previous.append(PreviousSchema(row.version, parsed))
        failures = check_levels(level, candidate.fmt, candidate.parsed, previous)
        self._checks.put(key, tuple(failures))
        return failures

    # --- reads -------------------------------------------------------------------------------------

    def _key(self, conn: Connection, schema_id: int, subject: str | None) -> int | None:
        """The stored key of ``schema_id`` in the context of ``subject`` (the default context when
        none is named); ``None`` for a context that does not exist."""
        context = DEFAULT_CONTEXT if subject is None else context_of(subject)
        number = db.context_number(conn, context)
        return None if number is None else stored_key(number, schema_id)

    def schema(self, schema_id: int, subject: str | None = None) -> SchemaRow:
        """The schema with ``schema_id`` in the default context, or in ``subject``'s context."""

        def run(conn: Connection) -> SchemaRow | None:
            key = self._key(conn, schema_id, subject)
            return None if key is None else db.schema_by_id(conn, key)

        found = self._read(run)
        if found is None:
            raise schema_not_found(schema_id)
        return found

    def schema_by_guid(self, guid: str) -> SchemaRow:
        """The schema a GUID names. Raises 40403 for an unknown or malformed GUID."""
        prefix = guid_prefix(guid)
        row = (
            None if prefix is None else self._read(lambda conn: db.schema_by_fingerprint_prefix(conn, prefix))
        )
        if row is None:
            raise RegistryError(ErrorCode.SCHEMA_NOT_FOUND, f"Schema {guid[:64]} not found")
        return row

    def context_of_key(self, key: int) -> str:
        """The name of the context a stored key belongs to."""
        return self._read(lambda conn: db.context_name(conn, key >> 32))

    @staticmethod
    def fingerprint_of(row: SchemaRow) -> str:
        return fingerprint(row.schema_type, row.schema, row.references, row.contract)

    def latest_with_metadata(
        self, subject: str, wanted: dict[str, str], deleted: bool = False
    ) -> SubjectVersion:
        """The newest version of ``subject`` whose metadata properties include ``wanted``.
        Raises 40401 when the subject has no versions, 40403 when none matches."""

        def run(conn: Connection) -> SubjectVersion:
            rows = [r for r in db.versions(conn, subject) if deleted or not r.deleted]
            if not rows:
                raise subject_not_found(subject)
            for row in reversed(rows):
                schema = db.schema_by_id(conn, row.schema_id)
                if schema is None:
                    continue
                props = properties_of(schema.contract)
                if all(props.get(k) == v for k, v in wanted.items()):
                    return SubjectVersion(subject, row.version, schema, row.deleted)
            raise schema_not_found()

        return self._read(run)

    def max_id(self) -> int:
        return self._read(db.max_id)

    def subjects_of(self, schema_id: int, deleted: bool = False, subject: str | None = None) -> list[str]:
        rows = self._versions_of(schema_id, deleted, subject)
        return sorted({r.subject for r in rows})

    def versions_of(
        self, schema_id: int, deleted: bool = False, subject: str | None = None
    ) -> list[VersionRow]:
        return self._versions_of(schema_id, deleted, subject)

    def _versions_of(self, schema_id: int, deleted: bool, subject: str | None) -> list[VersionRow]:
        def run(conn: Connection) -> list[VersionRow]:
            key = self._key(conn, schema_id, subject)
            rows = [] if key is None else db.versions_of_schema(conn, key, deleted)
            # Like Confluent: an id only soft-deleted versions use has no subjects unless asked.
            if not rows:
                raise schema_not_found(schema_id)
            return rows

        return self._read(run)

    def subjects(self, prefix: str = "", deleted: bool = False) -> list[str]:
        return self._read(lambda conn: db.subjects(conn, deleted, prefix))

    def listing(
        self, prefix: str = "", deleted: bool = False, latest_only: bool = False
    ) -> list[SubjectVersion]:
        def run(conn: Connection) -> list[SubjectVersion]:
            rows = db.all_versions(conn, deleted, prefix)
            if latest_only:
                newest: dict[str, VersionRow] = {}
                for row in rows:
                    newest[row.subject] = row
                rows = list(newest.values())
            found = []
            for row in rows:
                schema = db.schema_by_id(conn, row.schema_id)
                if schema is not None:
                    found.append(SubjectVersion(row.subject, row.version, schema, row.deleted))
            return found

        return self._read(run)

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        rows = self._read(lambda conn: db.versions(conn, subject, deleted))
        if not rows:
            raise subject_not_found(subject)
        return [r.version for r in rows]

    def _pick_row(self, conn: Connection, subject: str, version: int, deleted: bool) -> VersionRow:
        """What :meth:`_pick` answers, reading one row instead of all the subject's versions."""
        if version == LATEST:
            row = db.latest_version(conn, subject, include_deleted=deleted)
            if row is None:
                raise subject_not_found(subject)
            return row
        row = db.version_row(conn, subject, version)
        if row is not None and (deleted or not row.deleted):
            return row
        if db.latest_version(conn, subject, include_deleted=deleted) is None:
            raise subject_not_found(subject)
        raise version_not_found(version)

    def version(self, subject: str, version: int, deleted: bool = False) -> SubjectVersion:
        def run(conn: Connection) -> SubjectVersion:
            row = self._pick_row(conn, subject, version, deleted)
            schema = db.schema_by_id(conn, row.schema_id)
            if schema is None:  # pragma: no cover - rows and schemas change in one transaction
                raise version_not_found(version)
            return SubjectVersion(subject, row.version, schema, row.deleted)

        return self._read(run)

    def referenced_by(self, subject: str, version: int) -> list[int]:
        def run(conn: Connection) -> list[int]:
            row = self._pick_row(conn, subject, version, False)
            users = db.referencing_versions(conn, subject, row.version)
            return sorted({public_id(r.schema_id) for r in users if not r.deleted})

        return self._read(run)

    def lookup(self, subject: str, submission: SchemaSubmission, deleted: bool = False) -> SubjectVersion:
        """The version of ``subject`` holding this schema (``POST /subjects/{subject}``)."""

        def run(conn: Connection) -> SubjectVersion:
            if db.latest_version(conn, subject, include_deleted=deleted) is None:
                raise subject_not_found(subject)
            candidate = self.parse_candidate(conn, submission)
            found = self._find(conn, subject, candidate, submission.normalize, deleted)
            schema = None if found is None else db.schema_by_id(conn, found.schema_id)
            if found is None or schema is None:
                raise schema_not_found()
            return SubjectVersion(subject, found.version, schema, found.deleted)

        return self._read(run)

    # --- compatibility endpoint --------------------------------------------------------------------

    def test_compatibility(
        self, subject: str, version: int | None, submission: SchemaSubmission
    ) -> tuple[list[CompatibilityFailure], CompatibilityLevel]:
        """Failures of a candidate against one version (``version`` given) or against the versions
        the subject's level names (``None``)."""

        def run(conn: Connection) -> tuple[list[CompatibilityFailure], CompatibilityLevel]:
            level = self._level(conn, subject)
            rows: list[VersionRow]
            if version is not None:
                rows = [self._pick_row(conn, subject, version, False)]
            elif level.transitive:
                rows = db.versions(conn, subject, include_deleted=False)
            else:
                latest = db.latest_version(conn, subject, include_deleted=False)
                rows = [] if latest is None else [latest]
            candidate = self.parse_candidate(conn, submission)
            return self._failures(conn, subject, candidate, rows, level), level

        return self._read(run)

    # --- deletes -----------------------------------------------------------------------------------

    def _check_unreferenced(
        self, conn: Connection, subject: str, rows: Sequence[VersionRow], permanent: bool
    ) -> None:
        for row in rows:
            users = db.referencing_versions(conn, subject, row.version)
            # A soft-deleted referrer still needs its reference to be readable by id.
            if any(permanent or not user.deleted for user in users):
                raise RegistryError(
                    ErrorCode.REFERENCE_EXISTS,
                    "One or more references exist to the schema "
                    f"{{subject={subject}, version={row.version}}}",
                )

    def delete_version(self, subject: str, version: int, permanent: bool = False) -> int:
        def run(conn: Connection) -> int:
            self._writable(conn, subject)
            rows = db.versions(conn, subject)
            if not rows:
                raise subject_not_found(subject)
            if version == LATEST:
                pool = rows if permanent else [r for r in rows if not r.deleted]
                if not pool:
                    raise subject_not_found(subject)
                row = pool[-1]
            else:
                match = next((r for r in rows if r.version == version), None)
                if match is None:
                    raise version_not_found(version)
                row = match
            if not permanent and row.deleted:
                raise RegistryError(
                    ErrorCode.VERSION_SOFT_DELETED,
                    f"Subject '{subject}' Version {row.version} was soft deleted. Set permanent=true to "
                    "delete permanently",
                )
            if permanent and not row.deleted:
                raise RegistryError(
                    ErrorCode.VERSION_NOT_SOFT_DELETED,
                    f"Subject '{subject}' Version {row.version} was not deleted first before being "
                    "permanently deleted",
                )
            self._check_unreferenced(conn, subject, [row], permanent)
            if permanent:
                db.remove_versions(conn, subject, [row.version])
                db.delete_schema_if_unused(conn, row.schema_id)
            else:
                db.mark_deleted(conn, subject, [row.version])
            return row.version

        deleted = self._write(run)
        if permanent:
            self.removals += 1
        return deleted

    def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        def run(conn: Connection) -> list[int]:
            self._writable(conn, subject)
            rows = db.versions(conn, subject)
            if not rows:
                raise subject_not_found(subject)
            live = [r for r in rows if not r.deleted]
            if permanent:
                if live:
                    raise RegistryError(
                        ErrorCode.SUBJECT_NOT_SOFT_DELETED,
                        f"Subject '{subject}' was not deleted first before being permanently deleted",
                    )
                self._check_unreferenced(conn, subject, rows, True)
                db.remove_versions(conn, subject, [r.version for r in rows])
                for schema_id in {r.schema_id for r in rows}:
                    db.delete_schema_if_unused(conn, schema_id)
                db.compatibility.drop(conn, subject)
                db.modes.drop(conn, subject)
                return [r.version for r in rows]
            if not live:
                raise RegistryError(
                    ErrorCode.SUBJECT_SOFT_DELETED,
                    f"Subject '{subject}' was soft deleted.Set permanent=true to delete permanently",
                )
            self._check_unreferenced(conn, subject, live, False)
            db.mark_deleted(conn, subject, [r.version for r in live])
            return [r.version for r in live]

        deleted = self._write(run)
        if permanent:
            self.removals += 1
        return deleted

    def formatted(self, row: SchemaRow, fmt: str | None) -> str:
        """The schema text in the ``format`` a client asked for. Protobuf's ``serialized`` is the
        base64 FileDescriptorProto confluent-kafka's deserializer wants; a format a schema type does
        not know falls back to the stored text, as Confluent does."""
        if not fmt:
            return row.schema

        def run(conn: Connection) -> str:
            parsed = self._parse_row(conn, row)
            if fmt == "serialized":
                serialized = getattr(parsed, "serialized", None)
                if callable(serialized):
                    value = serialized()
                    return base64.b64encode(value).decode() if isinstance(value, bytes) else str(value)
            return row.schema

        return self._read(run)

    # --- for the table pipeline --------------------------------------------------------------------

    def registered_by_id(self, schema_id: int) -> RegisteredSchema:
        """What a decoder needs for ``schema_id``: text plus every reference resolved. Raises
        SchemaNotFound."""

        def run(conn: Connection) -> RegisteredSchema:
            row = db.schema_by_id(conn, schema_id)
            if row is None:
                raise SchemaNotFound(f"schema {schema_id} not found")
            return self._registered(conn, row, None, None)

        return self._read(run)

    def registered_latest(self, subject: str) -> RegisteredSchema:
        def run(conn: Connection) -> RegisteredSchema:
            latest = db.latest_version(conn, subject, include_deleted=False)
            row = None if latest is None else db.schema_by_id(conn, latest.schema_id)
            if latest is None or row is None:
                raise SchemaNotFound(f"subject {subject} has no live versions")
            return self._registered(conn, row, subject, latest.version)

        return self._read(run)

    def _registered(
        self, conn: Connection, row: SchemaRow, subject: str | None, version: int | None
    ) -> RegisteredSchema:
        try:
            resolved = self._resolve(conn, row.references)
        except RegistryError as exc:
            raise SchemaNotFound(exc.message) from exc
        return RegisteredSchema(
            schema_id=public_id(row.id),
            schema_type=row.schema_type,
            schema=row.schema,
            references=tuple(resolved.items()),
            subject=subject,
            version=version,
        )

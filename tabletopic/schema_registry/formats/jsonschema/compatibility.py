"""JSON Schema compatibility by content model: can every instance valid under the writer's schema be
validated by the reader's?

The walk compares the two schemas side by side and reports, with a JSON-pointer location into the
reader's schema (``#/properties/address/properties/zip``), each rule that lets a writer instance
fail the reader. Kinds follow Confluent's JSON Schema difference names (TYPE_NARROWED,
PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL, REQUIRED_ATTRIBUTE_ADDED, MAX_LENGTH_DECREASED, …); only the
incompatible ones are reported, since the registry asks a yes/no question with reasons.

Where a rule cannot be decided cheaply (regex inclusion, ``if``/``then``/``else``) the check is
conservative: it reports an incompatibility rather than admit data a reader may reject. Dropping a
writer-side constraint is always the conservative direction, which is what the ``allOf`` merge does
when two constraints conflict.
"""

from __future__ import annotations

import json
from fractions import Fraction
from functools import cache
from typing import Any

import jsonschema.validators
import referencing
import referencing.exceptions

from tabletopic.schema_registry.formats.base import Incompatibility
from tabletopic.schema_registry.formats.jsonschema.keywords import (
    ALL_TYPES,
    accepts,
    bound,
    compare_bounds,
    compare_reader_enum,
    dependencies_of,
    dict_of,
    enum_values,
    is_number,
    is_open,
    items_form,
    items_of,
    json_type_of,
    list_of,
    merge_schemas,
    schema_for_name,
    types_of,
    universal_names,
    value_key,
    without,
)
from tabletopic.schema_registry.formats.jsonschema.schema import (
    ParsedJsonSchema,
    Resolver,
    dereference,
    enter,
    escape_pointer,
    ref_of,
)

SUM_KEYWORDS = ("anyOf", "oneOf")
# Deeper than this, the walk stops looking (a pathological but metaschema-valid input must not
# exhaust the stack of the registry process).
MAX_DEPTH = 120


def check_compatibility(reader: ParsedJsonSchema, writer: ParsedJsonSchema) -> list[Incompatibility]:
    """Every reason data written with ``writer`` may fail validation under ``reader``.

    Returns:
        An empty list when compatible.
    """
    checker = _Checker(reader, writer)
    found = checker.compare(reader.schema, reader.root_resolver(), writer.schema, writer.root_resolver(), "#")
    unique: dict[tuple[str, str], Incompatibility] = {}
    for item in found:
        unique.setdefault((item.kind, item.location), item)
    return list(unique.values())


@cache
def _lenient_validator(dialect: str) -> Any:
    """The dialect's validator with ``oneOf`` checked as ``anyOf``.

    The structural walk cannot see ``oneOf``'s exclusivity (whether a writer value matches two
    branches depends on both sides at once), so it compares ``oneOf`` like ``anyOf``; checking
    listed values the same way keeps the two paths consistent, e.g. a schema always reads itself.
    """
    strict = jsonschema.validators.validator_for({"$schema": dialect})
    return jsonschema.validators.extend(strict, {"oneOf": strict.VALIDATORS["anyOf"]})


class _Checker:
    """One comparison: holds the two documents' dialects and the pairs currently being compared
    (a pair met again while in progress is assumed compatible, which ends recursive ``$ref``s)."""

    def __init__(self, reader: ParsedJsonSchema, writer: ParsedJsonSchema) -> None:
        self.reader = reader
        self.writer = writer
        self.active: set[tuple[int, int]] = set()
        self.depth = 0

    # -- entry and plumbing -------------------------------------------------------------------

    def compare(self, r: Any, rres: Resolver, w: Any, wres: Resolver, loc: str) -> list[Incompatibility]:
        if self.depth > MAX_DEPTH:
            return []
        try:
            r, rres = self._deref(r, rres, self.reader.dialect)
            w, wres = self._deref(w, wres, self.writer.dialect)
        except referencing.exceptions.Unresolvable as exc:
            return [Incompatibility("REFERENCE_UNRESOLVED", loc, f"a $ref could not be resolved: {exc}")]
        key = (id(r), id(w))
        if key in self.active:
            return []
        self.active.add(key)
        self.depth += 1
        try:
            found = self._compare(r, rres, w, wres, loc)
            # The merged writer may have dropped a constraint it could not combine; a single
            # writer branch that the reader reads is proof enough (the writer satisfies all).
            if (
                found
                and isinstance(w, dict)
                and isinstance(w.get("allOf"), list)
                and any(not self.compare(r, rres, branch, wres, loc) for branch in w["allOf"])
            ):
                return []
            return found
        finally:
            self.depth -= 1
            self.active.discard(key)

    @staticmethod
    def _deref(schema: Any, resolver: Resolver, dialect: str) -> tuple[Any, Resolver]:
        for _ in range(MAX_DEPTH):
            if ref_of(schema) is None:
                break
            schema, resolver = dereference(schema, resolver, dialect)
        return schema, enter(schema, resolver, dialect)

    # -- the walk -----------------------------------------------------------------------------

    def _compare(self, r: Any, rres: Resolver, w: Any, wres: Resolver, loc: str) -> list[Incompatibility]:
        if w is False or is_open(r):
            return []
        if r is False:
            return [
                Incompatibility("SCHEMA_REMOVED", loc, "the reader's schema is false and accepts nothing")
            ]
        if not isinstance(r, dict):
            return []
        w = {} if not isinstance(w, dict) else w
        unflattened = w
        if "allOf" in w:
            flat = self._flatten_all_of(w, wres)
            if flat is False:
                return []
            w = flat
        if types_of(w) == set():
            return []  # the merged writer admits no type at all: it writes nothing
        if enum_values(w) is not None:
            return self._check_values(r, rres, w, wres, loc)

        if "unevaluatedProperties" in r and "additionalProperties" not in r:
            r = self._close_unevaluated(r, rres, self.reader.dialect)
        if "unevaluatedProperties" in w and "additionalProperties" not in w:
            w = self._close_unevaluated(w, wres, self.writer.dialect)
        out: list[Incompatibility] = []
        if isinstance(r.get("allOf"), list):
            # Each reader branch against the writer as written: where the merged writer lost a
            # constraint (a property one branch lists and another bounds only through its
            # additionalProperties), a single writer branch the reader's branch reads still proves
            # it (see compare), so a schema always reads itself.
            for index, branch in enumerate(r["allOf"]):
                out += self.compare(branch, rres, unflattened, wres, f"{loc}/allOf/{index}")
            r = without(r, "allOf")

        wsum = next((k for k in SUM_KEYWORDS if isinstance(w.get(k), list)), None)
        if wsum is not None:
            return out + self._writer_sum(r, rres, w, wres, wsum, loc)
        rsum = next((k for k in SUM_KEYWORDS if isinstance(r.get(k), list)), None)
        if rsum is not None:
            found = self._reader_sum(r[rsum], rres, w, wres, rsum, loc)
            # As for the reader's allOf above: where the merged writer lost a constraint, a reader
            # branch that reads the writer as written (one of its allOf branches) still proves it.
            if (
                found
                and unflattened is not w
                and not self._reader_sum(r[rsum], rres, unflattened, wres, rsum, loc)
            ):
                found = []
            out += found
            r = without(r, rsum)

        out += self._compare_not(r, rres, w, wres, loc)
        out += self._compare_conditionals(r, w, loc)
        rtypes, wtypes = types_of(r), types_of(w)
        out += self._compare_types(rtypes, wtypes, loc)
        out += compare_reader_enum(r, wtypes, loc)
        if rtypes is not None and wtypes is not None and not any(accepts(rtypes, t) for t in wtypes):
            return out  # no shared type: the keyword rules below say nothing more
        both = {t for t in (wtypes or ALL_TYPES) if accepts(rtypes, t)}
        if both & {"number", "integer"}:
            out += self._compare_numbers(r, w, wtypes, loc)
        if "string" in both:
            out += self._compare_strings(r, w, loc)
        if "array" in both:
            out += self._compare_arrays(r, rres, w, wres, loc)
        if "object" in both:
            out += self._compare_objects(r, rres, w, wres, loc)
        return out

    def _close_unevaluated(self, r: dict[str, Any], rres: Resolver, dialect: str) -> dict[str, Any]:
        """Read ``unevaluatedProperties`` as ``additionalProperties`` over every property name the
        schema or its combined branches declare (one level deep): close to the 2019-09 meaning
        and never more permissive than it for the names it lists."""
        declared = dict(dict_of(r, "properties"))
        for keyword in ("allOf", "anyOf", "oneOf"):
            for branch in list_of(r, keyword):
                try:
                    target, _ = self._deref(branch, rres, dialect)
                except referencing.exceptions.Unresolvable:
                    continue
                if isinstance(target, dict):
                    for name in dict_of(target, "properties"):
                        declared.setdefault(name, True)
        return {**r, "properties": declared, "additionalProperties": r["unevaluatedProperties"]}

    def _flatten_all_of(self, w: dict[str, Any], wres: Resolver) -> dict[str, Any] | bool:
        merged = without(w, "allOf")
        for branch in w["allOf"]:
            try:
                branch, _ = self._deref(branch, wres, self.writer.dialect)
            except referencing.exceptions.Unresolvable:
                continue  # dropping a writer constraint only makes the check stricter
            if branch is False:
                return False
            if not isinstance(branch, dict):
                continue
            if isinstance(branch.get("allOf"), list):
                nested = self._flatten_all_of(branch, wres)
                if nested is False:
                    return False
                branch = nested if isinstance(nested, dict) else {}
            merged = merge_schemas(merged, branch)
        return merged

    def _check_values(
        self, r: dict[str, Any], rres: Resolver, w: dict[str, Any], wres: Resolver, loc: str
    ) -> list[Incompatibility]:
        """A writer limited to listed values is compatible exactly when the reader accepts each
        value the writer itself accepts (its other keywords may rule some of the list out)."""
        reader_cls = _lenient_validator(self.reader.dialect)
        writer_cls = _lenient_validator(self.writer.dialect)
        validator = reader_cls(r, registry=self.reader.registry, _resolver=rres)
        writer_validator = writer_cls(w, registry=self.writer.registry, _resolver=wres)
        try:
            values = [v for v in enum_values(w) or [] if writer_validator.is_valid(v)]
            rejected = [v for v in values if not validator.is_valid(v)]
        except (referencing.exceptions.Unresolvable, RecursionError) as exc:
            return [
                Incompatibility("REFERENCE_UNRESOLVED", loc, f"could not check the writer's values: {exc}")
            ]
        if not rejected:
            return []
        shown = ", ".join(json.dumps(v) for v in rejected[:5])
        reader_values = enum_values(r)
        if reader_values is not None:
            overlap = len(rejected) < len(values)
            kind = "ENUM_ARRAY_NARROWED" if overlap else "ENUM_ARRAY_CHANGED"
            return [
                Incompatibility(kind, loc, f"the reader's enum does not allow the writer's values {shown}")
            ]
        rtypes = types_of(r)
        if any(not accepts(rtypes, json_type_of(v)) for v in rejected):
            kind = (
                "TYPE_NARROWED" if any(accepts(rtypes, json_type_of(v)) for v in values) else "TYPE_CHANGED"
            )
            return [Incompatibility(kind, loc, f"the reader's type rejects the writer's values {shown}")]
        return [
            Incompatibility("ENUM_VALUE_REJECTED", loc, f"the reader rejects the writer's values {shown}")
        ]

    # -- combined schemas ---------------------------------------------------------------------

    def _writer_sum(
        self, r: dict[str, Any], rres: Resolver, w: dict[str, Any], wres: Resolver, wsum: str, loc: str
    ) -> list[Incompatibility]:
        """Writer data matches one of the writer's branches, so each branch must be readable."""
        rest = without(w, wsum)
        out: list[Incompatibility] = []
        for index, branch in enumerate(w[wsum]):
            where = f"{loc}/{wsum}/{index}"
            if is_open(rest):
                out += self.compare(r, rres, branch, wres, where)
                continue
            try:
                target, tres = self._deref(branch, wres, self.writer.dialect)
            except referencing.exceptions.Unresolvable as exc:
                out.append(Incompatibility("REFERENCE_UNRESOLVED", where, str(exc)))
                continue
            if target is False:
                continue
            merged = merge_schemas(rest, target) if isinstance(target, dict) else rest
            out += self.compare(r, rres, merged, tres, where)
        rsum = next((k for k in SUM_KEYWORDS if isinstance(r.get(k), list)), None)
        if rsum is not None and len(r[rsum]) < len(w[wsum]):
            out = [
                Incompatibility("SUM_TYPE_NARROWED", i.location, i.message)
                if i.kind == "COMBINED_TYPE_SUBSCHEMAS_CHANGED"
                else i
                for i in out
            ]
        return out

    def _reader_sum(
        self, branches: list[Any], rres: Resolver, w: dict[str, Any], wres: Resolver, rsum: str, loc: str
    ) -> list[Incompatibility]:
        """Reader accepts data matching any branch; every writer shape needs some branch.

        A writer with a type list is split by type first, so ``type: [string, null]`` is readable
        by ``anyOf: [{type: string}, {type: null}]`` though no single branch takes both.
        """
        wtypes = types_of(w)
        shapes = [w] if wtypes is None or len(wtypes) < 2 else [{**w, "type": t} for t in sorted(wtypes)]
        out: list[Incompatibility] = []
        for shape in shapes:
            first_reason: Incompatibility | None = None
            for index, branch in enumerate(branches):
                reasons = self.compare(branch, rres, shape, wres, f"{loc}/{rsum}/{index}")
                if not reasons:
                    break
                first_reason = first_reason or reasons[0]
            else:
                detail = (
                    f" (first reason: {first_reason.kind} at {first_reason.location})" if first_reason else ""
                )
                kind = "COMBINED_TYPE_SUBSCHEMAS_CHANGED" if branches else "SUM_TYPE_NARROWED"
                out.append(
                    Incompatibility(
                        kind,
                        f"{loc}/{rsum}",
                        f"no {rsum} branch of the reader reads the writer's data{detail}",
                    )
                )
        return out

    def _compare_not(
        self, r: dict[str, Any], rres: Resolver, w: dict[str, Any], wres: Resolver, loc: str
    ) -> list[Incompatibility]:
        if "not" not in r:
            return []
        where = f"{loc}/not"
        if "not" in w:
            # not X ⊇ not Y  ⇔  Y ⊇ X: the writer's excluded set must cover the reader's.
            if self.compare(w["not"], wres, r["not"], rres, where):
                return [
                    Incompatibility(
                        "NOT_TYPE_EXTENDED", where, "the reader excludes values the writer may write"
                    )
                ]
            return []
        excluded = r["not"]
        if isinstance(excluded, dict):
            excluded_types, writer_types = types_of(excluded), types_of(w)
            disjoint = (
                excluded_types is not None
                and writer_types is not None
                and not any(accepts(excluded_types, t) for t in writer_types)
            )
            if disjoint:
                return []  # nothing the writer writes is excluded
        return [
            Incompatibility("NOT_TYPE_EXTENDED", where, "the reader added a 'not' the writer does not have")
        ]

    @staticmethod
    def _compare_conditionals(r: dict[str, Any], w: dict[str, Any], loc: str) -> list[Incompatibility]:
        conditional = ("if", "then", "else")
        if not any(k in r for k in conditional):
            return []
        if all(value_key(r.get(k)) == value_key(w.get(k)) for k in conditional):
            return []
        return [
            Incompatibility("CONDITIONAL_SCHEMA_CHANGED", f"{loc}/if", "the reader's if/then/else differs")
        ]

    # -- keyword families ---------------------------------------------------------------------

    @staticmethod
    def _compare_types(rtypes: set[str] | None, wtypes: set[str] | None, loc: str) -> list[Incompatibility]:
        if rtypes is None:
            return []
        written = wtypes if wtypes is not None else set(ALL_TYPES)
        rejected = sorted(t for t in written if not accepts(rtypes, t))
        if not rejected:
            return []
        overlap = (
            wtypes is None
            or any(accepts(rtypes, t) for t in written)
            or ("integer" in rtypes and "number" in written)
        )
        kind = "TYPE_NARROWED" if overlap else "TYPE_CHANGED"
        return [
            Incompatibility(
                kind,
                f"{loc}/type",
                f"the reader's type {sorted(rtypes)} does not accept {', '.join(rejected)}",
            )
        ]

    def _compare_numbers(
        self, r: dict[str, Any], w: dict[str, Any], wtypes: set[str] | None, loc: str
    ) -> list[Incompatibility]:
        out: list[Incompatibility] = []
        for side in ("minimum", "maximum"):
            rb = bound(r, side, self.reader.dialect)
            if rb is None:
                continue
            wb = bound(w, side, self.writer.dialect)
            value, exclusive, keyword = rb
            prefix = ("EXCLUSIVE_" if exclusive else "") + side.upper()
            where = f"{loc}/{keyword}"
            if wb is None:
                out.append(Incompatibility(f"{prefix}_ADDED", where, f"the reader added {keyword} {value}"))
                continue
            tighter = value > wb[0] if side == "minimum" else value < wb[0]
            if tighter or (value == wb[0] and exclusive and not wb[1]):
                change = "INCREASED" if side == "minimum" else "DECREASED"
                out.append(
                    Incompatibility(
                        f"{prefix}_{change}",
                        where,
                        f"the reader's {keyword} {value} is tighter than the writer's {wb[0]}",
                    )
                )
        reader_multiple = r.get("multipleOf")
        if is_number(reader_multiple):
            rm = Fraction(str(reader_multiple))
            writer_multiple = w.get("multipleOf")
            wm = Fraction(str(writer_multiple)) if is_number(writer_multiple) else None
            where = f"{loc}/multipleOf"
            integers_only = wtypes is not None and "number" not in wtypes
            if wm is None:
                if not (integers_only and (1 / rm).denominator == 1):
                    out.append(
                        Incompatibility(
                            "MULTIPLE_OF_ADDED", where, f"the reader added multipleOf {reader_multiple}"
                        )
                    )
            elif (wm / rm).denominator != 1:
                kind = "MULTIPLE_OF_EXPANDED" if (rm / wm).denominator == 1 else "MULTIPLE_OF_CHANGED"
                out.append(
                    Incompatibility(
                        kind,
                        where,
                        f"multiples of {writer_multiple} are not all multiples of {reader_multiple}",
                    )
                )
        return out

    @staticmethod
    def _compare_strings(r: dict[str, Any], w: dict[str, Any], loc: str) -> list[Incompatibility]:
        out = compare_bounds(r, w, "Length", loc=loc)
        pattern = r.get("pattern")
        if isinstance(pattern, str) and pattern != w.get("pattern"):
            # Regex inclusion is undecidable in general: any new or different pattern counts.
            kind = "PATTERN_ADDED" if "pattern" not in w else "PATTERN_CHANGED"
            out.append(Incompatibility(kind, f"{loc}/pattern", f"the reader's pattern {pattern!r} differs"))
        return out

    def _compare_arrays(
        self, r: dict[str, Any], rres: Resolver, w: dict[str, Any], wres: Resolver, loc: str
    ) -> list[Incompatibility]:
        out = compare_bounds(r, w, "Items", loc=loc)
        if r.get("uniqueItems") is True and w.get("uniqueItems") is not True:
            out.append(
                Incompatibility(
                    "UNIQUE_ITEMS_ADDED", f"{loc}/uniqueItems", "the reader requires unique items"
                )
            )
        rprefix, rrest, rkey, rrest_key = items_of(r, reader=True)
        wprefix, wrest, _, _ = items_of(w)
        out += self._compare_item_forms(r, w, rkey, loc)
        out += self._compare_contains_counts(r, w, loc)
        for index in range(max(len(rprefix), len(wprefix))):
            rin, win = index < len(rprefix), index < len(wprefix)
            ri = rprefix[index] if rin else rrest
            wi = wprefix[index] if win else wrest
            if wi is False:
                break  # the writer never writes this position or any later one
            where = f"{loc}/{rkey}/{index}" if rin else f"{loc}/{rrest_key}"
            reasons = self.compare(ri, rres, wi, wres, where)
            if not reasons:
                continue
            if win and rin:
                out += reasons
            elif not win:
                kind = (
                    "ITEM_ADDED_TO_OPEN_CONTENT_MODEL"
                    if is_open(wi)
                    else "ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                )
                out.append(
                    Incompatibility(
                        kind, where, f"the reader constrains item {index}, which the writer left open"
                    )
                )
            else:
                kind = (
                    "ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL"
                    if ri is False
                    else "ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                )
                out.append(
                    Incompatibility(kind, where, f"the reader does not accept the writer's item {index}")
                )
        if wrest is not False:
            where = f"{loc}/{rrest_key}"
            reasons = self.compare(rrest, rres, wrest, wres, where)
            if reasons and not rprefix and not wprefix:
                out += reasons  # a plain list: report what changed inside the items
            elif reasons:
                kind = "ADDITIONAL_ITEMS_REMOVED" if rrest is False else "ADDITIONAL_ITEMS_NARROWED"
                out.append(
                    Incompatibility(
                        kind, where, "the reader accepts fewer additional items than the writer writes"
                    )
                )
        contains = r.get("contains")
        if (
            contains is not None
            and not is_open(contains)
            and ("contains" not in w or self.compare(contains, rres, w["contains"], wres, f"{loc}/contains"))
        ):
            out.append(
                Incompatibility("CONTAINS_NARROWED", f"{loc}/contains", "the reader's 'contains' is stricter")
            )
        return out

    @staticmethod
    def _compare_item_forms(
        r: dict[str, Any], w: dict[str, Any], rkey: str, loc: str
    ) -> list[Incompatibility]:
        """A list (``items: schema``) turned into a tuple or back is incompatible, as in Confluent's
        rules, even where every value would validate: the two are different content models."""
        rform, wform = items_form(r), items_form(w)
        if rform == "tuple" and wform == "list":
            return [
                Incompatibility(
                    "ITEM_ADDED_TO_OPEN_CONTENT_MODEL",
                    f"{loc}/{rkey}/0",
                    "the reader made a list of items into a tuple",
                )
            ]
        if rform == "list" and wform == "tuple":
            return [
                Incompatibility(
                    "SCHEMA_ADDED", f"{loc}/items", "the reader made a tuple into a list of items"
                )
            ]
        return []

    @staticmethod
    def _compare_contains_counts(r: dict[str, Any], w: dict[str, Any], loc: str) -> list[Incompatibility]:
        """``minContains`` may not grow and ``maxContains`` may not shrink (defaults: one and
        unbounded, and only where the writer has ``contains``: without it nothing is counted)."""
        if "contains" not in r:
            return []
        out: list[Incompatibility] = []
        rmin, wmin = r.get("minContains", 1), w.get("minContains", 1) if "contains" in w else 0
        if is_number(rmin) and is_number(wmin) and rmin > wmin:
            kind = "MIN_CONTAINS_INCREASED" if "minContains" in w else "MIN_CONTAINS_ADDED"
            out.append(
                Incompatibility(kind, f"{loc}/minContains", f"minContains changed from {wmin} to {rmin}")
            )
        rmax, wmax = r.get("maxContains"), w.get("maxContains")
        if is_number(rmax) and (not is_number(wmax) or rmax < wmax):
            kind = "MAX_CONTAINS_DECREASED" if is_number(wmax) else "MAX_CONTAINS_ADDED"
            out.append(Incompatibility(kind, f"{loc}/maxContains", f"the reader's maxContains is {rmax}"))
        return out

    def _compare_objects(
        self, r: dict[str, Any], rres: Resolver, w: dict[str, Any], wres: Resolver, loc: str
    ) -> list[Incompatibility]:
        out = compare_bounds(r, w, "Properties", loc=loc)
        rprops = dict_of(r, "properties")
        wprops = dict_of(w, "properties")
        wrequired = set(list_of(w, "required"))

        for name in [*wprops, *(n for n in rprops if n not in wprops)]:
            where = f"{loc}/properties/{escape_pointer(name)}"
            if name in rprops and name in wprops:
                out += self.compare(rprops[name], rres, wprops[name], wres, where)
            elif name in rprops:
                writer_view = schema_for_name(w, name)
                if writer_view is False:
                    continue  # closed writer never writes it: OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL
                if self.compare(rprops[name], rres, writer_view, wres, where):
                    kind = (
                        "PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"
                        if is_open(writer_view)
                        else "PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                    )
                    out.append(
                        Incompatibility(
                            kind,
                            where,
                            f"property {name!r} was added but the writer may write anything there",
                        )
                    )
            else:
                reader_view = schema_for_name(r, name)
                if self.compare(reader_view, rres, wprops[name], wres, where):
                    kind = (
                        "PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"
                        if reader_view is False
                        else "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"
                    )
                    out.append(
                        Incompatibility(
                            kind, where, f"property {name!r} was removed and the reader rejects it"
                        )
                    )

        rpatterns = dict_of(r, "patternProperties")
        wpatterns = dict_of(w, "patternProperties")
        for pattern, sub in rpatterns.items():
            writer_view = wpatterns.get(pattern, w.get("additionalProperties", True))
            where = f"{loc}/patternProperties/{escape_pointer(pattern)}"
            if writer_view is not False and self.compare(sub, rres, writer_view, wres, where):
                out.append(
                    Incompatibility(
                        "PATTERN_PROPERTIES_NARROWED", where, f"properties matching {pattern!r} narrowed"
                    )
                )

        rextra, wextra = r.get("additionalProperties", True), w.get("additionalProperties", True)
        if wextra is not False:
            where = f"{loc}/additionalProperties"
            if self.compare(rextra, rres, wextra, wres, where):
                kind = (
                    "ADDITIONAL_PROPERTIES_REMOVED" if rextra is False else "ADDITIONAL_PROPERTIES_NARROWED"
                )
                out.append(
                    Incompatibility(
                        kind, where, "the reader accepts fewer additional properties than the writer writes"
                    )
                )

        rrequired = list_of(r, "required")
        for name in rrequired:
            if name in wrequired:
                continue
            prop = rprops.get(name)
            if isinstance(prop, dict) and "default" in prop:
                continue  # REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED is compatible in Confluent's rules
            closed = name not in wprops and schema_for_name(w, name) is False
            kind = "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL" if closed else "REQUIRED_ATTRIBUTE_ADDED"
            out.append(
                Incompatibility(
                    kind, f"{loc}/required", f"the reader requires {name!r}, which the writer may omit"
                )
            )

        out += self._compare_dependencies(r, rres, w, wres, wrequired, loc)
        if self._property_names_narrowed(r, rres, w, wres, loc):
            out.append(
                Incompatibility(
                    "PROPERTY_NAMES_NARROWED",
                    f"{loc}/propertyNames",
                    "the reader restricts property names",
                )
            )
        return out

    def _property_names_narrowed(
        self, r: dict[str, Any], rres: Resolver, w: dict[str, Any], wres: Resolver, loc: str
    ) -> bool:
        """Whether the reader's ``propertyNames`` rejects a name the writer may write.

        A pattern that matches every string (``a*`` under search semantics) constrains nothing; a
        closed writer writes only the names it declares, so those are checked one by one;
        otherwise the two ``propertyNames`` schemas are compared (a writer without one writes any
        string).
        """
        names = r.get("propertyNames")
        if names is None or is_open(names) or universal_names(names):
            return False
        wnames = w.get("propertyNames", {"type": "string"})
        declared = dict_of(w, "properties")
        if w.get("additionalProperties", True) is False and not dict_of(w, "patternProperties"):
            validator = _lenient_validator(self.reader.dialect)(
                names, registry=self.reader.registry, _resolver=rres
            )
            try:
                return not all(validator.is_valid(name) for name in declared)
            except (referencing.exceptions.Unresolvable, RecursionError):
                return True
        return bool(self.compare(names, rres, wnames, wres, f"{loc}/propertyNames"))

    def _compare_dependencies(
        self,
        r: dict[str, Any],
        rres: Resolver,
        w: dict[str, Any],
        wres: Resolver,
        wrequired: set[str],
        loc: str,
    ) -> list[Incompatibility]:
        out: list[Incompatibility] = []
        rarrays, rschemas = dependencies_of(r)
        warrays, wschemas = dependencies_of(w)
        for trigger, needed in rarrays.items():
            missing = set(needed) - set(warrays.get(trigger, [])) - wrequired
            if missing:
                kind = "DEPENDENCY_ARRAY_EXTENDED" if trigger in warrays else "DEPENDENCY_ARRAY_ADDED"
                out.append(
                    Incompatibility(
                        kind,
                        f"{loc}/dependencies/{escape_pointer(trigger)}",
                        f"{trigger!r} now needs {sorted(missing)}",
                    )
                )
        for trigger, sub in rschemas.items():
            where = f"{loc}/dependencies/{escape_pointer(trigger)}"
            if trigger not in wschemas:
                if not is_open(sub):
                    out.append(
                        Incompatibility(
                            "DEPENDENCY_SCHEMA_ADDED", where, f"a schema now depends on {trigger!r}"
                        )
                    )
            elif self.compare(sub, rres, wschemas[trigger], wres, where):
                out.append(
                    Incompatibility(
                        "DEPENDENCY_SCHEMA_NARROWED", where, f"the schema for {trigger!r} narrowed"
                    )
                )
        return out

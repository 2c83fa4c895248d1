"""Data contracts: the ``metadata`` and ``ruleSet`` registered with a schema.

They are stored with the schema as one compact JSON text and are part of its identity (the same
schema text with another rule set is another schema, with another id, as in Confluent). The
registry does not run the rules: clients (confluent-kafka's serializers) evaluate CEL conditions and
migrations; it checks that each rule is well formed, with Confluent's error 42210 otherwise.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tabletopic.schema_registry.errors import ErrorCode, RegistryError

KINDS = frozenset({"TRANSFORM", "CONDITION"})
# Which modes each rule list admits (Confluent's RuleSet validation).
MODES = {
    "migrationRules": frozenset({"UPGRADE", "DOWNGRADE", "UPDOWN"}),
    "domainRules": frozenset({"WRITE", "READ", "WRITEREAD"}),
    "encodingRules": frozenset({"WRITE", "READ", "WRITEREAD"}),
}
_RULE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_\-]*$")


def invalid_rule_set(message: str) -> RegistryError:
    return RegistryError(ErrorCode.INVALID_RULESET, f"Invalid rule set: {message}")


def encode_contract(metadata: dict[str, Any] | None, rule_set: dict[str, Any] | None) -> str:
    """``metadata``/``ruleSet`` as the stored text ("" when both are absent or empty).

    Raises:
        RegistryError: 42210 when a rule is malformed.
    """
    body: dict[str, Any] = {}
    metadata, rule_set = _pruned(metadata), _pruned(rule_set)
    if metadata:
        body["metadata"] = metadata
    if rule_set:
        _validate(rule_set)
        body["ruleSet"] = rule_set
    return json.dumps(body, separators=(",", ":"), sort_keys=True, ensure_ascii=False) if body else ""


def _pruned(value: Any) -> Any:
    """``value`` without empty members (``None``, ``[]``, ``{}``), recursively: clients send
    ``"sensitive": []`` back for metadata registered without it, and it must be the same contract."""
    if isinstance(value, dict):
        kept = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v is not None and v != [] and v != {}}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


def properties_of(contract: str) -> dict[str, str]:
    """The ``metadata.properties`` of a stored contract (for ``GET /subjects/{s}/metadata``)."""
    if not contract:
        return {}
    props = json.loads(contract).get("metadata", {}).get("properties", {})
    return props if isinstance(props, dict) else {}


def _validate(rule_set: dict[str, Any]) -> None:
    seen: set[str] = set()
    for list_name, modes in MODES.items():
        for rule in rule_set.get(list_name) or []:
            name = rule.get("name", "")
            if not _RULE_NAME.match(name):
                raise invalid_rule_set(f"rule name {name!r} must start with a letter and use [A-Za-z0-9_-]")
            if name in seen:
                raise invalid_rule_set(f"rule name {name!r} is used twice")
            seen.add(name)
            if rule.get("kind") not in KINDS:
                raise invalid_rule_set(
                    f"rule {name!r} has kind {rule.get('kind')!r}, not one of {sorted(KINDS)}"
                )
            if rule.get("mode") not in modes:
                raise invalid_rule_set(
                    f"rule {name!r} in {list_name} has mode {rule.get('mode')!r}, not one of {sorted(modes)}"
                )

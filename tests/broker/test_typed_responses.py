"""Every handler returns its API's response type, generated from kio's classes
(:mod:`tabletopic.broker.protocol.responses`), so mypy checks each key a handler writes.

The generated module must be what the generator writes today (else a kio upgrade or a newly served
version would leave the types behind), every key of every type must be a field of some version of
kio's class (the check of the generator itself), and a misspelt key must be a mypy error.
"""

from __future__ import annotations

import inspect
import textwrap
import types
import typing
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from kio.index import load_response_schema
from mypy import api as mypy_api

from tabletopic.broker.handlers import APIS
from tabletopic.broker.protocol import response_codegen, responses
from tabletopic.broker.protocol.versions import kio_max_version, min_version

# Fetch encodes its response itself, records lent from the block cache and never copied
# (``broker/protocol/fetch_encoder.py``): its handler returns the encoded frame.
ENCODED_BY_THE_HANDLER = {1: "WireResponse"}


def response_type(api_key: int) -> type:
    """The generated TypedDict of an API's response, named as kio names the newest version's class."""
    name = load_response_schema(api_key, kio_max_version(api_key)).__name__
    response: type = getattr(responses, name)
    assert typing.is_typeddict(response)
    return response


def test_the_generated_response_types_are_current() -> None:
    assert response_codegen.TARGET.read_text() == response_codegen.render(), (
        "run `python -m tabletopic.broker.protocol.response_codegen` and commit responses.py"
    )


@pytest.mark.parametrize("api_key", sorted(APIS))
def test_each_handler_returns_its_response_type(api_key: int) -> None:
    """Read from the annotation as written (a string: the handler modules defer annotations)."""
    handler = inspect.unwrap(APIS[api_key].handle)
    returned = {part.strip() for part in handler.__annotations__["return"].split("|")}
    expected = ENCODED_BY_THE_HANDLER.get(api_key) or response_type(api_key).__name__
    assert expected in returned
    assert returned - {expected} <= {"None"}  # None: no response (Produce with acks=0)


def _unwrapped(hint: Any) -> Any:
    """The struct or value type a field holds: without ``| None`` and without its sequence."""
    args = [arg for arg in typing.get_args(hint) if arg is not type(None)]
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and len(args) == 1:
        hint = args[0]
    if typing.get_origin(hint) in (tuple, Sequence):
        return _unwrapped(typing.get_args(hint)[0])
    return hint


def unknown_keys(response: Any, kio_class: Any, path: str = "") -> list[str]:
    """The TypedDict's keys (nested ones as ``a.b``) that kio's class has no field for."""
    kio_hints = typing.get_type_hints(kio_class)
    unknown = []
    for name, hint in typing.get_type_hints(response).items():
        if name not in kio_hints:
            unknown.append(path + name)
            continue
        nested = _unwrapped(hint)
        if typing.is_typeddict(nested):
            unknown += unknown_keys(nested, _unwrapped(kio_hints[name]), f"{path}{name}.")
    return unknown


@pytest.mark.parametrize("api_key", sorted(APIS))
def test_a_response_type_names_only_fields_kio_has(api_key: int) -> None:
    """Each key is a field of some version from the lowest served (a served version may have fields
    a later one renamed, as Produce's topic name); a misspelt key is in none."""
    versions = range(min_version(api_key), kio_max_version(api_key) + 1)
    per_version = [
        set(unknown_keys(response_type(api_key), load_response_schema(api_key, v))) for v in versions
    ]
    assert set.intersection(*per_version) == set()


def test_a_misspelt_key_is_found_by_that_check() -> None:
    class Misspelt(typing.TypedDict):
        throttle_time: int
        eror_code: int

    assert unknown_keys(Misspelt, load_response_schema(26, 4)) == ["eror_code"]


@pytest.mark.timeout(240)
def test_mypy_refuses_a_misspelt_or_mistyped_response_key(tmp_path: Path) -> None:
    snippet = tmp_path / "snippet.py"
    snippet.write_text(
        textwrap.dedent(
            """
            from kio.schema.errors import ErrorCode
            from tabletopic.broker.protocol.responses import EndTxnResponse, OffsetForLeaderTopicResult

            misspelt: EndTxnResponse = {"throttle_time": 0, "eror_code": ErrorCode.none}
            mistyped: OffsetForLeaderTopicResult = {"topic": "t", "partitions": [{"partition": "0"}]}
            """
        )
    )
    stdout, _, _ = mypy_api.run(
        ["--strict", "--no-error-summary", "--cache-dir", str(tmp_path / ".mypy_cache"), str(snippet)]
    )
    assert 'Extra key "eror_code" for TypedDict "EndTxnResponse"' in stdout
    assert (
        'Incompatible types (expression has type "str", TypedDict item "partition" has type "int")' in stdout
    )

"""Questions about a Protobuf field descriptor that the runtimes answer differently: protobuf >= 6
(upb) dropped ``label`` in favour of ``is_repeated``/``is_required`` and has ``has_presence``; older
ones only have ``label``. The registry's renderer and the table converters ask them alike."""

from __future__ import annotations

from google.protobuf.descriptor import FieldDescriptor as FD


def is_repeated(fld: FD) -> bool:
    flag = getattr(fld, "is_repeated", None)
    if isinstance(flag, bool):
        return flag
    return bool(fld.label == FD.LABEL_REPEATED)


def is_required(fld: FD) -> bool:
    flag = getattr(fld, "is_required", None)
    if isinstance(flag, bool):
        return flag
    return bool(fld.label == FD.LABEL_REQUIRED)


def has_presence(fld: FD) -> bool:
    """Whether the field tells unset from its default (a message field, a oneof member, proto2 and
    proto3 ``optional`` scalars)."""
    flag = getattr(fld, "has_presence", None)
    if isinstance(flag, bool):
        return flag
    return fld.type == FD.TYPE_MESSAGE or fld.containing_oneof is not None

"""Test helpers: compile ``.proto`` text with protoc independently of the code under test."""

from __future__ import annotations

import base64
import os
import tempfile

from google.protobuf import descriptor_pb2, descriptor_pool


def compile_set(files: dict[str, str], target: str) -> descriptor_pb2.FileDescriptorSet:
    from grpc_tools import protoc

    include = os.path.join(os.path.dirname(protoc.__file__), "_proto")
    with tempfile.TemporaryDirectory() as root:
        for name, text in files.items():
            path = os.path.join(root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        out = os.path.join(root, "out.pb")
        status = protoc.main(
            [
                "protoc",
                f"-I{root}",
                f"-I{include}",
                "--include_imports",
                f"--descriptor_set_out={out}",
                target,
            ]
        )
        assert status == 0, f"test schema does not compile: {target}"
        with open(out, "rb") as handle:
            return descriptor_pb2.FileDescriptorSet.FromString(handle.read())


def serialized_descriptor(files: dict[str, str], target: str) -> str:
    """What confluent-kafka's serializer registers: base64 of the target's FileDescriptorProto."""
    fds = compile_set(files, target)
    [proto] = [f for f in fds.file if f.name == target]
    return base64.b64encode(proto.SerializeToString()).decode()


def independent_pool(files: dict[str, str], target: str) -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for proto in compile_set(files, target).file:
        pool.Add(proto)
    return pool

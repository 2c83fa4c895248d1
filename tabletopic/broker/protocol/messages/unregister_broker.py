"""UnregisterBroker (64): the id of a broker that left the cluster for good."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from kio.schema.unregister_broker.v0 import request as v0

UnregisterBrokerRequest: TypeAlias = "v0.UnregisterBrokerRequest"

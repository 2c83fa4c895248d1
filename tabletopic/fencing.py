"""One root for every fencing refusal, whichever part raises it.

Each part of a node writes only while it owns something, and ownership is handed over with an epoch
or a lease: a stream (opened with a higher epoch by its new leader), a broker registration (a newer
incarnation of the same broker id), a group or transaction coordinator slot, a table topic's commit
lease. When a newer owner has taken over, the old one is *fenced*: its write is refused and nothing of
it counts. Callers that only need to know "someone else owns this now, stop and step down" catch
:class:`Fenced`; those that react differently per part catch the part's own subclass:

- ``s3stream.streams.StreamFenced``: a stream was reopened by a newer owner;
- ``cluster.db.NodeFenced``: this broker's registration was taken over;
- ``broker.groups.store.GroupFenced``: another broker coordinates the group's slot;
- ``broker.transactions.store.TxnFenced``: another broker coordinates the transaction's slot;
- ``table.lease.LeaseFenced``: another coordinator holds the table topic's commit lease.
"""

from __future__ import annotations


class Fenced(Exception):
    """A newer owner (higher epoch, or a lease taken over) holds what this writer wrote under:
    the write was refused and must not be retried by this owner."""

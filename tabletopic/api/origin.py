"""Cross-site request checks for the admin listener.

A browser sends a cross-site form POST with the user's cached HTTP Basic credentials, so a page
anywhere could make an operator's browser pause a table pipeline. Browsers name the page that
sent a request in ``Origin`` (every POST, same-origin ones included) or ``Referer``, and a page
cannot forge either. State-changing console actions therefore need one of them naming this very
host; any other state-changing request that names a foreign origin is refused too, while API
clients (curl, scripts), which send neither, keep working on the ``/v1`` API.
"""

from __future__ import annotations

from collections.abc import Mapping
from urllib.parse import urlsplit

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _netloc(url: str) -> str | None:
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return parts.netloc.lower() if parts.scheme in ("http", "https") and parts.netloc else None


def same_origin(headers: Mapping[str, str], required: bool) -> bool:
    """Whether a request may change state, judged by who sent it.

    Args:
        headers: the request's headers, names in lower case.
        required: refuse a request that names no origin at all (the console's own actions,
            which only a browser page sends).

    Returns:
        True when ``Origin`` (else ``Referer``) names this request's ``Host``, or when neither is
        sent and ``required`` is false.
    """
    host = headers.get("host", "").lower()
    origin = headers.get("origin")
    if origin is not None:  # "null" (a sandboxed or file page) names no host: refused
        return bool(host) and _netloc(origin) == host
    referer = headers.get("referer")
    if referer is not None:
        return bool(host) and _netloc(referer) == host
    return not required

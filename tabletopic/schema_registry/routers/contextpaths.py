"""``/contexts/{ctx}/...``: Confluent's base context path, rewritten before routing.

A client whose registry URL ends in ``/contexts/.team`` works inside that context without naming it
in each subject: ``/contexts/.team/subjects/s/versions`` is ``/subjects/:.team:s/versions``, an id
lookup ``/contexts/.team/schemas/ids/1`` is ``/schemas/ids/1?subject=:.team:``, ``/contexts/.team/
subjects`` lists the context's subjects, and ``/contexts/.team/config`` and ``/mode`` are the
context's own settings (which its subjects fall back to before the global ones). ``GET /contexts``
and ``DELETE /contexts/{ctx}`` stay the app's own routes.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, unquote, urlencode

from tabletopic.schema_registry.contexts import DEFAULT_CONTEXT, qualify
from tabletopic.schema_registry.routers.middleware import ASGIApp, Receive, Scope, Send

# Paths whose segment after the prefix is a subject.
_SUBJECT_AFTER = {("subjects",): 1, ("compatibility", "subjects"): 2, ("config",): 1, ("mode",): 1}


class ContextPaths:
    """ASGI layer mapping base-context-path requests onto qualified subjects."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            raw = scope.get("raw_path") or scope["path"].encode()
            text = raw.decode("latin-1").split("?", 1)[0]
            if text.startswith("/contexts/") and text.count("/") >= 3:
                scope = _rewrite(scope, text)
        await self.app(scope, receive, send)


def _rewrite(scope: Scope, raw_path: str) -> Scope:
    _, _, raw_context, *rest = raw_path.split("/")
    context = unquote(raw_context)
    if not context.startswith("."):
        context = "." + context
    query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
    prefix = f":{context}:" if context != DEFAULT_CONTEXT else ""
    head = tuple(rest[:2]) if rest[:2] == ["compatibility", "subjects"] else tuple(rest[:1])
    at = _SUBJECT_AFTER.get(head)
    if at is not None and len(rest) > at:
        rest[at] = quote(qualify(context, unquote(rest[at])), safe=":")
    elif head in (("config",), ("mode",)) and prefix:
        rest.append(quote(prefix, safe=":"))  # the context's own setting
    elif head == ("subjects",) or rest[:1] == ["schemas"]:
        # Listings and id lookups are scoped by a subject (prefix) naming the context.
        key = "subject" if rest[:2] == ["schemas", "ids"] else "subjectPrefix"
        if prefix and any(k == key for k, _ in query):
            # A subject the client names (confluent-kafka's deserializer sends its topic's) is in
            # the context too: unqualified, it would find the default context's id.
            query = [(k, qualify(context, v) if k == key else v) for k, v in query]
        elif prefix:
            query.append((key, prefix))
    new_raw = "/" + "/".join(rest)
    return dict(
        scope,
        path=unquote(new_raw),
        raw_path=new_raw.encode("latin-1"),
        query_string=urlencode(query).encode("latin-1"),
    )

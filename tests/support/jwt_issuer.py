"""A throwaway OAuth token issuer for OAUTHBEARER tests: an RSA key, its JWKS file, signed JWTs
with whatever claims a test wants (expired, wrong audience, ...), and a token endpoint that hands
them to clients by the client-credentials grant."""

from __future__ import annotations

import base64
import http.server
import json
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from joserfc import jwt
from joserfc.jwk import RSAKey

ISSUER = "https://issuer.example.com"
AUDIENCE = "tabletopic"


class JwtIssuer:
    def __init__(self, directory: Path, kid: str = "test-key") -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.key = RSAKey.generate_key(2048, parameters={"kid": kid, "use": "sig", "alg": "RS256"})
        self.jwks_path = directory / "jwks.json"
        self.jwks_path.write_text(json.dumps({"keys": [self.key.as_dict(private=False)]}))

    @property
    def jwks_url(self) -> str:
        return self.jwks_path.as_uri()

    def token(self, subject: str, lifetime_s: float = 300, **claims: Any) -> str:
        now = int(time.time())
        body = {"sub": subject, "iss": ISSUER, "aud": AUDIENCE, "iat": now, "exp": int(now + lifetime_s)}
        body.update(claims)
        return jwt.encode({"alg": "RS256", "kid": self.key.kid}, body, self.key)

    def server_settings(self) -> dict[str, str]:
        return {
            "sasl.oauthbearer.jwks.endpoint.url": self.jwks_url,
            "sasl.oauthbearer.expected.audience": AUDIENCE,
            "sasl.oauthbearer.expected.issuer": ISSUER,
        }


class TokenEndpoint:
    """An OAuth 2.0 token endpoint on loopback for the issuer: the client-credentials grant with
    HTTP Basic client authentication, as librdkafka's ``sasl.oauthbearer.method=oidc`` asks; a
    token's subject is the client id. ``clients`` maps the ids it knows to their secrets, and
    ``requests`` counts the tokens it handed out."""

    def __init__(self, issuer: JwtIssuer, clients: dict[str, str]) -> None:
        self.issuer, self.clients, self.requests = issuer, clients, 0
        self._server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/oauth2/token"

    def __enter__(self) -> TokenEndpoint:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, authorization: str, form: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        scheme, _, encoded = authorization.partition(" ")
        client_id, _, secret = base64.b64decode(encoded or "").decode().partition(":")
        if scheme != "Basic" or self.clients.get(client_id) != secret:
            return 401, {"error": "invalid_client", "error_description": "unknown client or wrong secret"}
        if form.get("grant_type") != ["client_credentials"]:
            return 400, {"error": "unsupported_grant_type"}
        self.requests += 1
        return 200, {"access_token": self.issuer.token(client_id), "token_type": "bearer", "expires_in": 300}

    def _handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        endpoint = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0"))).decode()
                status, answer = endpoint._answer(self.headers.get("Authorization", ""), parse_qs(body))
                payload = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler

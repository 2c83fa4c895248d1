"""A throwaway OAuth token issuer for OAUTHBEARER tests: an RSA key, its JWKS file, and signed JWTs
with whatever claims a test wants (expired, wrong audience, ...)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

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

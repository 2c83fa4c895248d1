"""Configuration keys of broker security, named as in Apache Kafka (``ssl.*``, ``sasl.*``,
``connections.max.reauth.ms``); ``ssl.certificate.location`` / ``ssl.key.location`` are the
librdkafka spellings, accepted as the simpler alternative to a PEM keystore."""

from tabletopic.config import ConfigKey, T, define, in_range, one_of

SASL_ENABLED_MECHANISMS = define(
    "sasl.enabled.mechanisms",
    list,
    ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"],
    "SASL mechanisms offered on SASL_PLAINTEXT and SASL_SSL listeners (PLAIN, SCRAM-SHA-256, "
    "SCRAM-SHA-512, OAUTHBEARER). PLAIN checks `sasl.plain.users`, then the user's SCRAM credentials; "
    "OAUTHBEARER validates JWTs against `sasl.oauthbearer.jwks.endpoint.url`.",
    "security",
)
SASL_OAUTHBEARER_JWKS_ENDPOINT_URL = define(
    "sasl.oauthbearer.jwks.endpoint.url",
    str,
    None,
    "OAUTHBEARER: the JWKS document whose public keys sign accepted tokens, as a `file://` URL (or a "
    "path); re-read whenever the file changes, so keys rotate without a restart.",
    "security",
)
SASL_OAUTHBEARER_EXPECTED_AUDIENCE = define(
    "sasl.oauthbearer.expected.audience",
    list,
    [],
    "OAUTHBEARER: audiences a token's `aud` must name one of (comma separated); empty: `aud` unchecked.",
    "security",
)
SASL_OAUTHBEARER_EXPECTED_ISSUER = define(
    "sasl.oauthbearer.expected.issuer",
    str,
    None,
    "OAUTHBEARER: the `iss` a token must carry; empty: `iss` unchecked.",
    "security",
)
SASL_OAUTHBEARER_SUB_CLAIM_NAME = define(
    "sasl.oauthbearer.sub.claim.name",
    str,
    "sub",
    "OAUTHBEARER: the claim naming the principal (`User:<claim value>`).",
    "security",
)
SASL_OAUTHBEARER_CLOCK_SKEW_SECONDS = define(
    "sasl.oauthbearer.clock.skew.seconds",
    int,
    30,
    "OAUTHBEARER: slack allowed between the token issuer's clock and this node's on `exp` and `nbf`.",
    "security",
    in_range(0),
)
CONNECTIONS_MAX_REAUTH_MS = define(
    "connections.max.reauth.ms",
    int,
    0,
    "KIP-368: the SASL session lifetime told to clients; a client must re-authenticate (as the same "
    "principal) before it ends or its connection is closed. 0 means sessions never expire.",
    "security",
    in_range(0),
)
SASL_SERVER_MAX_RECEIVE_SIZE = define(
    "sasl.server.max.receive.size",
    int,
    524288,
    "The largest request frame a connection on a SASL listener may send before it has authenticated; "
    "a longer length prefix closes the connection before anything is buffered (Kafka's key, against "
    "CVE-2022-34917). After authentication `socket.request.max.bytes` applies.",
    "security",
    in_range(8),
)
CONNECTION_FAILED_AUTHENTICATION_DELAY_MS = define(
    "connection.failed.authentication.delay.ms",
    int,
    100,
    "How long the answer to a failed SASL authentication is held back before the connection is "
    "closed, so a client with a wrong password cannot retry in a tight loop.",
    "security",
    in_range(0),
)
SSL_KEYSTORE_TYPE = define(
    "ssl.keystore.type",
    str,
    "PEM",
    "Format of the broker's key and certificate; PEM is the one supported.",
    "security",
    one_of("PEM"),
)
SSL_KEYSTORE_LOCATION = define(
    "ssl.keystore.location",
    str,
    None,
    "PEM file holding the broker's private key and certificate chain (SSL and SASL_SSL listeners).",
    "security",
)
SSL_KEYSTORE_CERTIFICATE_CHAIN = define(
    "ssl.keystore.certificate.chain",
    str,
    None,
    "The broker's certificate chain as inline PEM text (instead of a file).",
    "security",
)
SSL_KEYSTORE_KEY = define(
    "ssl.keystore.key",
    str,
    None,
    "The broker's private key as inline PEM text (with `ssl.keystore.certificate.chain`).",
    "security",
)
SSL_CERTIFICATE_LOCATION = define(
    "ssl.certificate.location",
    str,
    None,
    "PEM file of the broker's certificate chain (with `ssl.key.location`); an alternative to "
    "`ssl.keystore.location`.",
    "security",
)
SSL_KEY_LOCATION = define(
    "ssl.key.location",
    str,
    None,
    "PEM file of the broker's private key (with `ssl.certificate.location`).",
    "security",
)
SSL_KEY_PASSWORD = define(
    "ssl.key.password",
    str,
    None,
    "Password of an encrypted private key.",
    "security",
)
SSL_TRUSTSTORE_TYPE = define(
    "ssl.truststore.type",
    str,
    "PEM",
    "Format of the certificate authorities client certificates are checked against; PEM only.",
    "security",
    one_of("PEM"),
)
SSL_TRUSTSTORE_LOCATION = define(
    "ssl.truststore.location",
    str,
    None,
    "PEM file of the certificate authorities that sign client certificates (mutual TLS).",
    "security",
)
SSL_TRUSTSTORE_CERTIFICATES = define(
    "ssl.truststore.certificates",
    str,
    None,
    "The trusted certificate authorities as inline PEM text (instead of a file).",
    "security",
)
SSL_CLIENT_AUTH = define(
    "ssl.client.auth",
    str,
    "none",
    "Mutual TLS: `required` refuses clients without a certificate signed by the truststore, "
    "`requested` asks for one, `none` does not. A client certificate's subject (RFC 2253, "
    "`User:CN=...`) is the principal on SSL listeners. SASL_SSL listeners ignore it and take only "
    "`listener.name.<listener>.ssl.client.auth` (KIP-684); the HTTPS services take "
    "`http.ssl.client.auth` first.",
    "security",
    one_of("none", "requested", "required"),
)
SSL_ENABLED_PROTOCOLS = define(
    "ssl.enabled.protocols",
    list,
    ["TLSv1.2", "TLSv1.3"],
    "TLS versions accepted (TLSv1.2, TLSv1.3).",
    "security",
)


def _http_ssl(key: ConfigKey[T], doc: str) -> ConfigKey[T | None]:
    """``http.`` + a broker-wide ``ssl.*`` key: the HTTPS services' own value, else the broker's."""
    return define(
        "http." + key.name,
        key.type,
        None,
        f"HTTPS services (schema registry, Iceberg REST catalog, admin API): {doc} Empty: `{key.name}`.",
        "security",
        key.validator,
    )


HTTP_SSL_KEYSTORE_LOCATION = _http_ssl(
    SSL_KEYSTORE_LOCATION, "PEM file of their private key and certificate chain."
)
HTTP_SSL_CERTIFICATE_LOCATION = _http_ssl(
    SSL_CERTIFICATE_LOCATION, "PEM file of their certificate chain (with `http.ssl.key.location`)."
)
HTTP_SSL_KEY_LOCATION = _http_ssl(SSL_KEY_LOCATION, "PEM file of their private key.")
HTTP_SSL_KEY_PASSWORD = _http_ssl(SSL_KEY_PASSWORD, "password of an encrypted private key.")
HTTP_SSL_TRUSTSTORE_LOCATION = _http_ssl(
    SSL_TRUSTSTORE_LOCATION, "PEM file of the certificate authorities that sign client certificates."
)
HTTP_SSL_CLIENT_AUTH = _http_ssl(
    SSL_CLIENT_AUTH,
    "client certificates (`none`, `requested`, `required`), apart from the Kafka listeners'. With "
    "`authentication.method=BASIC`, `none` lets clients in with a password alone while "
    "`ssl.client.auth=required` holds for the SSL listeners.",
)
HTTP_SSL_ENABLED_PROTOCOLS = _http_ssl(SSL_ENABLED_PROTOCOLS, "TLS versions accepted.")


AUTHORIZER_CLASS_NAME = define(
    "authorizer.class.name",
    str,
    "",
    "Turns ACL authorization on: Kafka's `org.apache.kafka.metadata.authorizer.StandardAuthorizer` "
    "(or `kafka.security.authorizer.AclAuthorizer`) selects the built-in authorizer over ACLs in the "
    "metadata database. Empty: every request is allowed and the ACL APIs answer SECURITY_DISABLED.",
    "security",
)
SUPER_USERS = define(
    "super.users",
    str,
    "",
    "Principals allowed everything whatever the ACLs say, separated by semicolons as in Kafka: "
    "`User:admin;User:CN=ops,O=Example`.",
    "security",
)
ALLOW_EVERYONE_IF_NO_ACL_FOUND = define(
    "allow.everyone.if.no.acl.found",
    bool,
    False,
    "With an authorizer: whether a resource no ACL names is open to everyone (else only super users).",
    "security",
)
QUOTA_WINDOW_NUM = define(
    "quota.window.num",
    int,
    11,
    "Samples kept to measure a client's rate against its quota.",
    "security",
    in_range(2, 3600),
)
QUOTA_WINDOW_SIZE_SECONDS = define(
    "quota.window.size.seconds",
    int,
    1,
    "Length of one quota sample.",
    "security",
    in_range(1, 3600),
)
AUTHENTICATION_METHOD = define(
    "authentication.method",
    str,
    "NONE",
    "Authentication of the HTTP services (schema registry, Iceberg REST catalog, admin API): NONE, "
    "or BASIC for HTTP Basic against the SASL users (`sasl.plain.users` and SCRAM credentials) and "
    "bearer tokens from the catalog's `/v1/oauth/tokens`. Unauthenticated requests get 401 in the "
    "service's own error shape; `/health` stays open.",
    "security",
    one_of("NONE", "BASIC"),
)
AUTHENTICATION_REALM = define(
    "authentication.realm", str, "tabletopic", "Realm named in the HTTP Basic challenge.", "security"
)
HTTP_READWRITE_USERS = define(
    "http.readwrite.users",
    list,
    [],
    "Users with the read-write role on the HTTP services (`*`: every user); `super.users` have it "
    "too. Every other authenticated user may only read (403 on writes).",
    "security",
)
HTTP_TOKEN_SECRET = define(
    "http.oauth.token.secret",
    str,
    None,
    "Key signing the bearer tokens of `/v1/oauth/tokens`; set the same value on every node of a "
    "cluster. Empty: a random key per process (tokens end with a restart).",
    "security",
)
HTTP_TOKEN_LIFETIME_MS = define(
    "http.oauth.token.lifetime.ms",
    int,
    3600000,
    "How long a bearer token of `/v1/oauth/tokens` is valid.",
    "security",
    in_range(1000),
)
SASL_MECHANISM_INTER_BROKER_PROTOCOL = define(
    "sasl.mechanism.inter.broker.protocol",
    str,
    "PLAIN",
    "SASL mechanism of the broker's own connections when `inter.broker.listener.name` is a SASL "
    "listener (transaction markers to other brokers, the dead-letter producer). Its credentials are "
    "`listener.name.<listener>.<mechanism>.sasl.jaas.config`. Kafka's default GSSAPI is not offered.",
    "security",
    one_of("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
)
LISTENER_NAME_PREFIX = define(
    "listener.name.*",
    str,
    None,
    "Per-listener settings, as in Kafka (listener and mechanism in lower case in the key). "
    "`listener.name.<listener>.ssl.*`: that listener's own value of an `ssl.*` key (keystore, "
    "truststore, `ssl.client.auth`, `ssl.enabled.protocols`, ...), else the broker-wide one; on a "
    "SASL_SSL listener `ssl.client.auth` is only its own key, default `none` (KIP-684). "
    "`listener.name.<listener>.<mechanism>.sasl.jaas.config`: the credentials the broker itself logs "
    "in with on that listener, in JAAS form: `org.apache.kafka.common.security.scram.ScramLoginModule "
    'required username="broker" password="...";` (the login module name is not checked).',
    "security",
)
SSL_ENDPOINT_IDENTIFICATION_ALGORITHM = define(
    "ssl.endpoint.identification.algorithm",
    str,
    "https",
    "Whether the broker's own TLS connections to other brokers check that the certificate names the "
    "host connected to: `https` checks (Kafka's default), empty does not.",
    "security",
    one_of("https", ""),
)

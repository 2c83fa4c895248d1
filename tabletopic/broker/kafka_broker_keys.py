"""The rest of Apache Kafka 4.0's broker keys: accepted with Kafka's type and default so that
AlterConfigs / IncrementalAlterConfigs on the BROKER resource, ``server.properties`` and
``--override`` take them, stored, and reported by DescribeConfigs, as a Kafka broker does. None of
them changes anything here (the documentation field says so). ``kafka_settings`` declares, with
their validation, the Kafka keys clients and tools set most; keys tabletopic honours are declared
by the code that reads them.

This module is the last of ``config.SETTINGS_MODULES``: it declares only the names no module
before it declared, so a key that gains a meaning here moves to its module without a change here.

Why: operators' scripts and tools copy whole broker configurations, for instance
``sasl.kerberos.min.time.before.relogin``; a Kafka broker accepts each of its own keys, and
refusing one ("unknown broker config") fails the whole resource for nothing. Left out on
purpose: keys whose silent acceptance would mislead (``node.id``, which ``broker.id`` is here;
``log.retention.hours`` / ``.minutes``, which would not change retention as they do in Kafka).
"""

from __future__ import annotations

from typing import Any

from tabletopic.config import REGISTRY, define

_GROUP = "kafka compatibility"
_DOC = "Kafka broker key, accepted, stored and reported for compatibility; no effect here."
LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1
_PRINCIPAL_BUILDER = "org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder"

# (name, type, Kafka's default); Kafka's short, int and long are int here, its double float, its
# class and password types str.
KAFKA_BROKER_KEYS: tuple[tuple[str, type, Any], ...] = (
    # security: SASL, Kerberos, OAUTHBEARER, SSL, delegation tokens
    ("sasl.kerberos.service.name", str, None),
    ("sasl.kerberos.kinit.cmd", str, "/usr/bin/kinit"),
    ("sasl.kerberos.ticket.renew.window.factor", float, 0.8),
    ("sasl.kerberos.ticket.renew.jitter", float, 0.05),
    ("sasl.kerberos.min.time.before.relogin", int, 60_000),
    ("sasl.kerberos.principal.to.local.rules", list, ["DEFAULT"]),
    ("sasl.login.refresh.window.factor", float, 0.8),
    ("sasl.login.refresh.window.jitter", float, 0.05),
    ("sasl.login.refresh.min.period.seconds", int, 60),
    ("sasl.login.refresh.buffer.seconds", int, 300),
    ("sasl.login.callback.handler.class", str, None),
    ("sasl.login.class", str, None),
    ("sasl.login.connect.timeout.ms", int, None),
    ("sasl.login.read.timeout.ms", int, None),
    ("sasl.login.retry.backoff.ms", int, 100),
    ("sasl.login.retry.backoff.max.ms", int, 10_000),
    ("sasl.client.callback.handler.class", str, None),
    ("sasl.server.callback.handler.class", str, None),
    ("sasl.jaas.config", str, None),
    ("sasl.oauthbearer.scope.claim.name", str, "scope"),
    ("sasl.oauthbearer.token.endpoint.url", str, None),
    ("sasl.oauthbearer.jwks.endpoint.refresh.ms", int, 3_600_000),
    ("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", int, 100),
    ("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", int, 10_000),
    ("security.inter.broker.protocol", str, "PLAINTEXT"),
    ("security.providers", str, None),
    ("principal.builder.class", str, _PRINCIPAL_BUILDER),
    ("ssl.protocol", str, "TLSv1.3"),
    ("ssl.provider", str, None),
    ("ssl.cipher.suites", list, []),
    ("ssl.keystore.password", str, None),
    ("ssl.truststore.password", str, None),
    ("ssl.keymanager.algorithm", str, "SunX509"),
    ("ssl.trustmanager.algorithm", str, "PKIX"),
    ("ssl.secure.random.implementation", str, None),
    ("ssl.principal.mapping.rules", str, "DEFAULT"),
    ("ssl.engine.factory.class", str, None),
    ("ssl.allow.dn.changes", bool, False),
    ("ssl.allow.san.changes", bool, False),
    ("delegation.token.secret.key", str, None),
    ("delegation.token.max.lifetime.ms", int, 604_800_000),
    ("delegation.token.expiry.time.ms", int, 86_400_000),
    ("delegation.token.expiry.check.interval.ms", int, 3_600_000),
    ("password.encoder.secret", str, None),
    ("password.encoder.old.secret", str, None),
    ("password.encoder.keyfactory.algorithm", str, None),
    ("password.encoder.cipher.algorithm", str, "AES/CBC/PKCS5Padding"),
    ("password.encoder.key.length", int, 128),
    ("password.encoder.iterations", int, 4096),
    # quotas and throttling
    ("replication.quota.window.num", int, 11),
    ("replication.quota.window.size.seconds", int, 1),
    ("alter.log.dirs.replication.quota.window.num", int, 11),
    ("alter.log.dirs.replication.quota.window.size.seconds", int, 1),
    ("controller.quota.window.num", int, 11),
    ("controller.quota.window.size.seconds", int, 1),
    ("client.quota.callback.class", str, None),
    ("leader.replication.throttled.rate", int, LONG_MAX),
    ("follower.replication.throttled.rate", int, LONG_MAX),
    ("replica.alter.log.dirs.io.max.bytes.per.second", int, LONG_MAX),
    # network
    ("socket.listen.backlog.size", int, 50),
    ("socket.connection.setup.timeout.ms", int, 10_000),
    ("socket.connection.setup.timeout.max.ms", int, 30_000),
    ("request.timeout.ms", int, 30_000),
    ("max.connection.creation.rate", int, INT_MAX),
    ("max.connections.per.ip.overrides", str, ""),
    ("early.start.listeners", str, None),
    ("num.replica.alter.log.dirs.threads", int, None),
    # replication and leadership
    ("replica.socket.timeout.ms", int, 30_000),
    ("replica.socket.receive.buffer.bytes", int, 65_536),
    ("replica.fetch.wait.max.ms", int, 500),
    ("replica.fetch.min.bytes", int, 1),
    ("replica.fetch.response.max.bytes", int, 10_485_760),
    ("replica.fetch.backoff.ms", int, 1000),
    ("replica.high.watermark.checkpoint.interval.ms", int, 5000),
    ("replica.selector.class", str, None),
    ("leader.imbalance.per.broker.percentage", int, 10),
    ("fetch.purgatory.purge.interval.requests", int, 1000),
    ("producer.purgatory.purge.interval.requests", int, 1000),
    ("delete.records.purgatory.purge.interval.requests", int, 1),
    # log
    ("log.dir", str, "/tmp/kafka-logs"),
    ("log.cleaner.dedupe.buffer.size", int, 134_217_728),
    ("log.cleaner.io.buffer.size", int, 524_288),
    ("log.cleaner.io.buffer.load.factor", float, 0.9),
    ("log.flush.scheduler.interval.ms", int, LONG_MAX),
    ("log.flush.offset.checkpoint.interval.ms", int, 60_000),
    ("log.flush.start.offset.checkpoint.interval.ms", int, 60_000),
    ("log.initial.task.delay.ms", int, 30_000),
    ("log.dir.failure.timeout.ms", int, 30_000),
    ("log.cleaner.max.compaction.lag.ms.enable", bool, True),
    ("remote.log.manager.thread.pool.size", int, 2),
    ("remote.log.manager.task.interval.ms", int, 30_000),
    ("remote.log.manager.copy.max.bytes.per.second", int, LONG_MAX),
    ("remote.log.manager.fetch.max.bytes.per.second", int, LONG_MAX),
    ("remote.log.manager.copier.thread.pool.size", int, 10),
    ("remote.log.manager.expiration.thread.pool.size", int, 10),
    ("remote.log.reader.threads", int, 10),
    ("remote.log.reader.max.pending.tasks", int, 100),
    ("remote.log.index.file.cache.total.size.bytes", int, 1_073_741_824),
    ("remote.log.storage.manager.class.name", str, None),
    ("remote.log.storage.manager.class.path", str, None),
    ("remote.log.storage.manager.impl.prefix", str, "rsm.config."),
    ("remote.log.metadata.manager.class.name", str, None),
    ("remote.log.metadata.manager.class.path", str, None),
    ("remote.log.metadata.manager.impl.prefix", str, "rlmm.config."),
    ("remote.log.metadata.manager.listener.name", str, None),
    ("remote.fetch.max.wait.ms", int, 500),
    ("remote.list.offsets.request.timeout.ms", int, 30_000),
    # consumer groups and offsets
    ("offsets.topic.segment.bytes", int, 104_857_600),
    ("offsets.topic.compression.codec", int, 0),
    ("offsets.load.buffer.size", int, 5_242_880),
    ("offsets.commit.timeout.ms", int, 5000),
    ("group.coordinator.threads", int, 1),
    ("group.coordinator.rebalance.protocols", list, ["classic", "consumer"]),
    ("group.coordinator.append.linger.ms", int, 10),
    ("group.consumer.session.timeout.ms", int, 45_000),
    ("group.consumer.min.session.timeout.ms", int, 45_000),
    ("group.consumer.max.session.timeout.ms", int, 60_000),
    ("group.consumer.heartbeat.interval.ms", int, 5000),
    ("group.consumer.min.heartbeat.interval.ms", int, 5000),
    ("group.consumer.max.heartbeat.interval.ms", int, 15_000),
    ("group.consumer.max.size", int, INT_MAX),
    ("group.consumer.assignors", list, ["uniform", "range"]),
    ("group.consumer.migration.policy", str, "bidirectional"),
    ("group.share.enable", bool, False),
    # transactions and producers
    ("transaction.state.log.segment.bytes", int, 104_857_600),
    ("transaction.state.log.load.buffer.size", int, 5_242_880),
    ("transaction.remove.expired.transaction.cleanup.interval.ms", int, 3_600_000),
    ("transaction.partition.verification.enable", bool, True),
    ("producer.id.expiration.check.interval.ms", int, 600_000),
    # KRaft: the quorum, metadata log and broker registration (PostgreSQL holds all of it here)
    ("process.roles", list, []),
    ("controller.listener.names", str, None),
    ("controller.quorum.voters", list, []),
    ("controller.quorum.bootstrap.servers", list, []),
    ("controller.quorum.election.timeout.ms", int, 1000),
    ("controller.quorum.election.backoff.max.ms", int, 1000),
    ("controller.quorum.fetch.timeout.ms", int, 2000),
    ("controller.quorum.append.linger.ms", int, 25),
    ("controller.quorum.request.timeout.ms", int, 2000),
    ("controller.quorum.retry.backoff.ms", int, 20),
    ("controller.socket.timeout.ms", int, 30_000),
    ("metadata.log.dir", str, None),
    ("metadata.log.segment.bytes", int, 1_073_741_824),
    ("metadata.log.segment.ms", int, 604_800_000),
    ("metadata.max.retention.bytes", int, 104_857_600),
    ("metadata.max.retention.ms", int, 604_800_000),
    ("metadata.log.max.record.bytes.between.snapshots", int, 20_971_520),
    ("metadata.log.max.snapshot.interval.ms", int, 3_600_000),
    ("metadata.max.idle.interval.ms", int, 500),
    ("initial.broker.registration.timeout.ms", int, 60_000),
    ("server.max.startup.time.ms", int, LONG_MAX),
    # metrics, policies, plug-ins
    ("metric.reporters", list, []),
    ("metrics.num.samples", int, 2),
    ("metrics.sample.window.ms", int, 30_000),
    ("metrics.recording.level", str, "INFO"),
    ("kafka.metrics.reporters", list, []),
    ("kafka.metrics.polling.interval.secs", int, 10),
    ("telemetry.max.bytes", int, 1_048_576),
    ("create.topic.policy.class.name", str, None),
    ("alter.config.policy.class.name", str, None),
    ("config.providers", list, []),
    ("unstable.api.versions.enable", bool, False),
    ("unstable.feature.versions.enable", bool, False),
)


def _declare() -> None:
    for name, type_, default in KAFKA_BROKER_KEYS:
        if name not in REGISTRY:
            define(name, type_, default, _DOC, _GROUP)


_declare()

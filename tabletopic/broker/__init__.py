"""The Kafka protocol server: connections, request dispatch, partitions on s3stream, groups, admin."""

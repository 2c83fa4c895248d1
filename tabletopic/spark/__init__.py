"""The Spark side: session factory, ingest job, maintenance and the SQL shell."""

"""Operations on table topics beyond the streaming pipeline: status read from the table, verify,
redrive, rebuild, and the embedded SQL path."""

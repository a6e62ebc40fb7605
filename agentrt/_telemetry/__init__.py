"""Telemetry: OpenTelemetry spans and metrics (`_otel`), and the fields of the runtime's
log records (`_log_fields`); both read the runtime through protocols of their own."""

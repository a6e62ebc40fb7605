"""The operator console: the fleet in a web page (see docs/console.md)."""

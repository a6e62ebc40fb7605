"""Backends: one pure adapter per coding CLI."""

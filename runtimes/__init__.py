"""Runtimes that execute the schedules a2a-compiler emits (see docs/runtime.md)."""

"""Shared answering: every method's retrieval becomes a prompt the same way (DESIGN: Answering)."""

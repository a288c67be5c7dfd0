"""Deterministic token estimates (``continuity.tokens``)."""

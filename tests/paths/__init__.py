"""Naming a store and its folders (``continuity.paths``)."""

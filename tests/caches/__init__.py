"""Derived data: the thread index, the catalog, small threads without caches, verify and rebuild-
index.
"""

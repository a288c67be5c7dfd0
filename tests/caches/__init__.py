"""Derived data (``continuity.caches``): the thread index and its block sums, the catalog, small
threads without caches, a full disk, and integrity under damage and misuse.
"""

"""The frameworks' own test suites, run against continuity (issue 27): see ``suites.py``."""

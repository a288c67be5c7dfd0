"""The test suite, by subsystem: a folder a part of the library (see ``conftest.py``)."""

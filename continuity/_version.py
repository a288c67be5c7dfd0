"""The package's version: the distribution's too (pyproject reads it from here), and what
``continuity --version`` prints without reading package metadata."""

__version__ = "0.1.0"

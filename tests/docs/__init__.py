"""The documentation: every page's Python and console examples run, the generated pages are fresh,
and the site builds with ``mkdocs build --strict``."""

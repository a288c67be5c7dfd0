"""The project's own rules: layers, the public API, contracts, the tools' bounded
runs."""

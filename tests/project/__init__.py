"""The project's own rules: layers, the public API, README and contracts, the tools' bounded
runs."""

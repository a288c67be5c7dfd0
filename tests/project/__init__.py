"""The project's own rules: layers, the public API, contracts, the tests' mirror of the package;
and the tools' own tests (bounded runs of the benchmarks and the fault families, the fetchers
of what ``tests/outside/`` needs, the scripted model server), which need nothing outside."""

"""Developer tools: contract generation, the thread generator, benchmarks."""

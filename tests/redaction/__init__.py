"""Secret redaction (``continuity.redaction``): the rules, the shapes a provider or runtime
brings, and the API path through a store."""

"""Integrations of the MemoryHub client with agent frameworks (optional extras, imported lazily)."""

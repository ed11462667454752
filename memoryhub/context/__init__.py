"""Model-facing context: assembly (active summary + tail) and consumer traces of who read what."""

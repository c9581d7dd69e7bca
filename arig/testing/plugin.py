"""arig's pytest plugin (registered under the ``pytest11`` entry point)."""

"""The command line: ``python -m arig info | demo | top``."""

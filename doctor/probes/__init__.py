"""Probes: pure ``parse_*`` functions from bytes/text to dataclasses, and ``@provider``
functions that fetch a source through the Host and parse it. Parsers never do I/O."""

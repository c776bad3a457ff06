"""Built-in checks: one module per concern, each a few small rules over typed facts."""

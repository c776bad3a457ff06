"""Parts of the demo scenario; each module has ``build(w: BundleWriter) -> None``."""

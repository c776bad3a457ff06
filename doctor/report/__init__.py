"""Renderers of a Report: text (rich), JSON (+ schema), JUnit XML, Markdown."""

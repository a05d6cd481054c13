"""Citewise over HTTP: `create_app(settings)` (FastAPI) and the routers behind it. `citewise serve` runs it."""

from citewise.server.app import create_app

__all__ = ["create_app"]

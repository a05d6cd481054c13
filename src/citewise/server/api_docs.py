"""The interactive API reference at /docs (Swagger UI), served entirely from the package.

FastAPI's own /docs page loads Swagger UI's script, stylesheet and favicon from a CDN, so without internet it is a
blank page; its /redoc page loads ReDoc and Google Fonts from CDNs too. The app turns both off (`docs_url=None`,
`redoc_url=None`) and `add_api_docs` adds the same /docs and /docs/oauth2-redirect pages, made by FastAPI's own
`get_swagger_ui_html`, pointing at the copies of swagger-ui-dist vendored in citewise/web/vendor/ (see the README
there). /redoc is not served: it would mean vendoring a second, equally large bundle for a second view of the same
schema. Like FastAPI's pages, these are not behind the API keys: the schema documents the API, it holds no data.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import FileResponse, HTMLResponse, Response

WEB_DIR = Path(__file__).resolve().parents[1] / "web"
DOCS_URL = "/docs"
OAUTH2_REDIRECT_URL = "/docs/oauth2-redirect"  # FastAPI's default `swagger_ui_oauth2_redirect_url`
ASSETS_URL = "/docs/assets"
# The only files /docs/assets serves: Swagger UI's bundle and stylesheet, and the web chat's icon.
ASSETS = {
    "swagger-ui-bundle.js": WEB_DIR / "vendor" / "swagger-ui-bundle.js",
    "swagger-ui.css": WEB_DIR / "vendor" / "swagger-ui.css",
    "favicon.svg": WEB_DIR / "favicon.svg",
}
# Swagger UI checks the schema against validator.swagger.io unless told not to: nothing may leave the machine.
SWAGGER_UI_PARAMETERS = {"validatorUrl": None}


def add_api_docs(app: FastAPI) -> None:
    """/docs, /docs/oauth2-redirect and /docs/assets/{name} on `app` (created with docs_url=None, redoc_url=None)."""

    async def swagger_ui(request: Request) -> HTMLResponse:
        # Behind a proxy that mounts the app under a prefix, every URL carries it (as FastAPI's own page does).
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=root + (app.openapi_url or "/openapi.json"),
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.svg",
            oauth2_redirect_url=root + OAUTH2_REDIRECT_URL,
            init_oauth=app.swagger_ui_init_oauth,
            swagger_ui_parameters={**SWAGGER_UI_PARAMETERS, **(app.swagger_ui_parameters or {})},
        )

    async def oauth2_redirect(request: Request) -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    async def asset(request: Request) -> Response:
        path = ASSETS.get(request.path_params["name"])
        if path is None or not path.is_file():
            raise StarletteHTTPException(status_code=404, detail="Not Found")
        # Revalidated on every load (the URL has no version in it), but answered 304 when the browser has it.
        response = FileResponse(path, headers={"Cache-Control": "no-cache"}, stat_result=path.stat())
        etag = response.headers["etag"]
        if etag in request.headers.get("if-none-match", "").split(", "):
            return Response(status_code=304, headers={"ETag": etag, "Cache-Control": "no-cache"})
        return response

    app.add_route(DOCS_URL, swagger_ui, include_in_schema=False)
    app.add_route(OAUTH2_REDIRECT_URL, oauth2_redirect, include_in_schema=False)
    app.add_route(ASSETS_URL + "/{name}", asset, include_in_schema=False)

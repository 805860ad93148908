"""Where the web agent's files come from: web/ in the repo and LiteRT.js from web/node_modules (`npm ci`).

LiteRT.js 2.5.3's JS layer maps tensor types float32, int32 and uint8 only, although its WASM kernels run
int8 models; the int8 fixture models have int8 inputs and outputs. `litert_core_js()` serves its
dist/index.js with int8 added to that table (one line, checked against the locked version), so the page
runs the same .tflite files as the other agents.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

from bench.core.errors import ConfigError
from bench.core.paths import WEB_DIR

NODE_MODULES = WEB_DIR / "node_modules"
LITERT_CORE = NODE_MODULES / "@litertjs" / "core"
LITERT_UTILS = NODE_MODULES / "@litertjs" / "wasm-utils"
INT8_ANCHOR = "var DATATYPES = Object.freeze([\n"
INT8_ENTRY = '  { dtype: "int8", typedArrayConstructor: Int8Array, elementType: ElementType.INT8 },\n'


def litert_version() -> str:
    """The installed @litertjs/core version, or ConfigError saying to run `npm ci`."""
    try:
        return str(json.loads((LITERT_CORE / "package.json").read_text())["version"])
    except (OSError, ValueError, KeyError):
        raise ConfigError(
            f"LiteRT.js is not installed under {NODE_MODULES}",
            hint=f"run `npm ci` in {WEB_DIR} (.ci/setup does it for a checkout)",
        ) from None


@functools.cache
def litert_core_js() -> bytes:
    """@litertjs/core's dist/index.js with int8 tensors enabled (see the module docstring)."""
    litert_version()
    src = (LITERT_CORE / "dist" / "index.js").read_text()
    if INT8_ANCHOR not in src:
        raise ConfigError(
            f"{LITERT_CORE}/dist/index.js has no tensor type table to add int8 to",
            hint="web/package-lock.json pins the LiteRT.js version bench/browser/assets.py was written for",
        )
    return src.replace(INT8_ANCHOR, INT8_ANCHOR + INT8_ENTRY, 1).encode()


def wasm_dir_url() -> str:
    """The URL path (on the page server) of LiteRT.js's WASM builds."""
    return "/litert/core/wasm/"


def static_file(path: str) -> tuple[bytes, str] | None:
    """(content, content type) of a page-server path under /web/ or /litert/, or None."""
    if path == "/litert/core/dist/index.js":
        return litert_core_js(), "text/javascript"
    for prefix, base in (("/litert/core/", LITERT_CORE), ("/litert/wasm-utils/", LITERT_UTILS), ("/web/", WEB_DIR)):
        if path.startswith(prefix):
            target = (base / path[len(prefix) :]).resolve()
            if (
                base.resolve() not in target.parents
                or not target.is_file()
                or "node_modules" in target.relative_to(base.resolve()).parts[:1]
            ):
                return None
            return target.read_bytes(), content_type(target)
    return None


def content_type(path: Path) -> str:
    """The MIME type the page needs for `path` (module scripts and WASM are checked by the browser)."""
    return {
        ".js": "text/javascript",
        ".wasm": "application/wasm",
        ".html": "text/html; charset=utf-8",
        ".json": "application/json",
        ".pem": "text/plain",
    }.get(path.suffix, "application/octet-stream")


def bundle_files() -> list[Path]:
    """What a page downloads: the agent's modules, the page, LiteRT.js's JS and the WASM build it loads."""
    agent = sorted((WEB_DIR / "agent").glob("*.js"))
    return [
        WEB_DIR / "index.html",
        *agent,
        LITERT_CORE / "dist" / "index.js",
        LITERT_UTILS / "dist" / "index.js",
        LITERT_CORE / "wasm" / "litert_wasm_internal.js",
        LITERT_CORE / "wasm" / "litert_wasm_internal.wasm",
    ]

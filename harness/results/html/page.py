"""The page machinery shared by every report: templates, text cleaning, chart embedding.

A single page (report.html, compare.html, across) is one self-contained file: the
stylesheet, the table script and the Vega bundle (Vega, Vega-Lite and vega-embed, from
vl-convert) are inlined, so it opens from a CI artifact or a file:// URL with no network. A
site (the history site) shares one copy of those assets (:func:`site_assets`) that every
page names by relative path, so the site grows by kilobytes per page. Templates are rendered with autoescape on
and a ``finalize`` hook that cleans every printed value, so no record field (a message, an
op id) can close a tag or smuggle in a control character.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup

__all__ = [
    "Cell",
    "Chart",
    "Column",
    "Grid",
    "GridColumn",
    "Table",
    "clean_text",
    "first_line",
    "fmt_num",
    "render_page",
    "script_json",
    "site_assets",
    "vega_bundle",
]

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
# C0 controls other than tab/newline/CR, DEL, C1 controls, and lone surrogates.
_UNPRINTABLE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff]")
MESSAGE_LIMIT = 8000  # characters of a failure message shown; the rest is in the op's log


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean_text(value: object) -> str:
    """Text safe to print anywhere in a page: ANSI colour sequences dropped, other control
    characters and lone surrogates written as visible escapes (``\\x00``, ``\\ud800``)."""
    text = "" if value is None else str(value)
    return _UNPRINTABLE.sub(_escape_char, _ANSI.sub("", text))


def first_line(text: str, width: int = 160) -> str:
    line = (text.strip().splitlines() or [""])[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def clip(text: str, limit: int = MESSAGE_LIMIT) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n… ({len(text) - limit} more characters)"


def fmt_num(value: float | None, digits: int = 4) -> str:
    return "" if value is None else f"{value:.{digits}g}"


def _finite(data: Any) -> Any:
    """``data`` with every infinite or NaN number as None (JSON has no such numbers): a ratio over
    a zero time must not cost the page."""
    if isinstance(data, float) and not math.isfinite(data):
        return None
    if isinstance(data, Mapping):
        return {k: _finite(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [_finite(v) for v in data]
    return data


def script_json(data: Any) -> Markup:
    """JSON to place inside a <script type="application/json"> element.

    ``ensure_ascii`` escapes U+2028/2029 and lone surrogates; ``<``, ``>`` and ``&`` are
    escaped so no string in the data can end the script element or open a comment."""
    text = json.dumps(_finite(data), ensure_ascii=True, sort_keys=True, separators=(",", ":"), allow_nan=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    return Markup(text)  # noqa: S704 - escaped above for the script-data context


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    numeric: bool = False
    title: str = ""  # a header tooltip


@dataclass(frozen=True)
class Cell:
    text: str
    sort: float | str | None = None  # the value sorted on; the text when None
    href: str | None = None
    cls: str = ""


@dataclass(frozen=True)
class Table:
    """A sortable, filterable table: ``rows`` are dicts of column key -> Cell, and
    ``attrs`` per row become data- attributes the filters read (status, op)."""

    table_id: str
    columns: Sequence[Column]
    rows: Sequence[Mapping[str, Cell]]
    row_attrs: Sequence[Mapping[str, str]] = ()
    filters: Sequence[tuple[str, str, Sequence[str]]] = ()  # (attribute, label, choices)
    caption: str = ""


@dataclass(frozen=True)
class Chart:
    """One Vega-Lite chart: an id, a heading, the spec (with its datasets) and a note."""

    chart_id: str
    title: str
    spec: Mapping[str, Any]
    note: str = ""
    marks: int = 0  # how many data rows feed it (0: the chart says it has nothing to show)


@dataclass(frozen=True)
class GridColumn:
    """A column of a :class:`Grid`: ``kind`` is text, num (right-aligned, sorted as a number,
    shown to ``digits`` significant digits), status (upper case, coloured and iconed) or code;
    ``href`` names the row field holding the cell's link; ``width`` is a px hint (0: shares
    what is left)."""

    key: str
    label: str
    kind: str = "text"
    title: str = ""
    width: int = 0
    digits: int = 4
    href: str = ""


@dataclass(frozen=True)
class Grid:
    """A table of any length, drawn in the browser from JSON one page of rows at a time;
    sorted on a header click or Enter, filtered by text and by a select per ``filters`` key."""

    grid_id: str
    label: str
    columns: Sequence[GridColumn]
    rows: Sequence[Mapping[str, Any]]
    filters: Sequence[tuple[str, str]] = ()  # (column key, label)
    page_size: int = 100
    caption: str = ""
    carried: Sequence[str] = ()  # row fields carried in the data but not shown (a case's id)

    def data(self) -> dict[str, Any]:
        keys = [c.key for c in self.columns]
        extra = [c.href for c in self.columns if c.href and c.href not in keys]
        extra += [k for k, _ in self.filters if k not in keys and k not in extra]
        extra += [k for k in self.carried if k not in keys and k not in extra]
        index = {k: i for i, k in enumerate(keys + extra)}
        columns = []
        for c in self.columns:
            col: dict[str, Any] = {"key": c.key, "label": c.label, "kind": c.kind}
            if c.title:
                col["title"] = c.title
            if c.width:
                col["width"] = c.width
            if c.kind == "num":
                col["digits"] = c.digits
            if c.href:
                col["href"] = index[c.href]
            columns.append(col)
        filters = []
        for key, label in self.filters:
            seen = sorted({str(r.get(key)) for r in self.rows if r.get(key) not in (None, "")})
            filters.append({"key": key, "label": label, "choices": seen, "index": index[key]})
        return {"label": self.label, "columns": columns, "filters": filters, "page_size": self.page_size,
                "keys": keys + extra,
                "rows": [[_json_value(r.get(k)) for k in keys + extra] for r in self.rows]}


def _json_value(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if value is None or isinstance(value, (int, str, bool)):
        return value
    return str(value)


def _finalize(value: object) -> object:
    if isinstance(value, Markup):
        return value
    if value is None:
        return ""
    if isinstance(value, str):
        return clean_text(value)
    return value


@functools.cache
def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("harness.results.html", "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        finalize=_finalize,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["script_json"] = script_json
    env.filters["first_line"] = first_line
    return env


def _asset(name: str) -> str:
    return resources.files("harness.results.html").joinpath("assets", name).read_text(encoding="utf-8")


def _vega_lite_version() -> str:
    """The Vega-Lite version the charts are written for (altair's schema), as vl-convert names
    it ("6.4"); the newest vl-convert knows of the same major version when it lacks that one."""
    import altair as alt
    import vl_convert as vlc

    major, minor = alt.SCHEMA_VERSION.lstrip("v").split(".")[:2]
    known = list(vlc.get_vegalite_versions())
    wanted = f"{major}.{minor}"
    if wanted in known:
        return wanted
    same_major = [v for v in known if v.split(".")[0] == major]
    if not same_major:
        raise RuntimeError(f"this vl-convert has no Vega-Lite {major}.x (altair "
                           f"{alt.__version__} writes {alt.SCHEMA_VERSION}); upgrade vl-convert-python")
    return max(same_major, key=lambda v: tuple(int(p) for p in v.split(".")))


@functools.cache
def vega_bundle() -> str:
    """Vega + Vega-Lite + vega-embed as one classic script (sets window.vegaEmbed), made by
    vl-convert once per process (about a second) and reused by every page after."""
    import vl_convert as vlc

    snippet = "window.vegaEmbed = vegaEmbed; window.vega = vega; window.vegaLite = vegaLite;"
    bundle: str = vlc.javascript_bundle(snippet, vl_version=_vega_lite_version())
    # The bundle is inlined in a <script>; no "</script" may occur inside it (none does today,
    # and this only rewrites it inside string or regex literals, where "<\/" means the same).
    return re.sub(r"</(script)", r"<\\/\1", bundle, flags=re.IGNORECASE)


@functools.cache
def _static() -> tuple[Markup, Markup]:
    css, js = _asset("report.css"), _asset("report.js")
    return Markup(css), Markup(js)  # noqa: S704 - the package's own files (tests check no "</script")


ASSET_FILES = ("report.css", "report.js", "vega.js")


def site_assets(folder: str = "assets") -> dict[str, str]:
    """The shared assets of a site: {path: text} for the stylesheet, the table script and the
    Vega bundle, which :func:`render_page` pages name with ``assets=``."""
    css, js = _static()
    return {f"{folder}/report.css": str(css), f"{folder}/report.js": str(js), f"{folder}/vega.js": vega_bundle()}


def render_page(template: str, *, title: str, charts: Sequence[Chart] = (), assets: str | None = None,
                **context: Any) -> str:
    """Render one page from the package's templates.

    Without ``assets`` everything is inlined, the Vega bundle only when the page has a chart.
    With ``assets`` (a relative folder such as ``../assets/``) the page names the shared files
    of :func:`site_assets` there instead."""
    css, js = _static()
    need_vega = any(c.marks for c in charts)
    if assets is not None:
        return _environment().get_template(template).render(
            title=title, charts=charts, css=Markup(""), script=Markup(""), vega=Markup(""),
            assets=assets, need_vega=need_vega, **context)
    return _environment().get_template(template).render(
        title=title,
        charts=charts,
        css=css,
        script=js,
        vega=Markup(vega_bundle()) if need_vega else Markup(""),  # noqa: S704 - vl-convert's bundle
        assets=None,
        need_vega=need_vega,
        **context,
    )

// Tables: click a header to sort (again to reverse); the filter box and selects hide rows.
// Grids (div.grid): tables of any length drawn from a JSON script, one page of rows at a
// time; sorting and filtering work on the data, so a 5,000-row table costs one page of DOM.
// window.harnessGrids[id].view() gives the filtered, sorted rows (tests read it).
// Charts: each .chart div names a <script type="application/json"> holding its Vega-Lite
// spec; vegaEmbed draws it. The views are kept in window.harnessCharts (tests read them).
(function () {
  "use strict";

  function cellValue(row, index, numeric) {
    var cell = row.cells[index];
    var raw = cell.getAttribute("data-sort");
    if (raw === null) { raw = cell.textContent.trim(); }
    if (!numeric) { return raw.toLowerCase(); }
    if (raw === "") { return null; }
    var n = parseFloat(raw);
    return isNaN(n) ? null : n;
  }

  function sortTable(table, index, numeric, th) {
    var body = table.tBodies[0];
    var descending = th.getAttribute("aria-sort") === "ascending";
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = cellValue(a, index, numeric), y = cellValue(b, index, numeric);
      if (x === null && y === null) { return 0; }
      if (x === null) { return 1; }   // empty cells last, either way
      if (y === null) { return -1; }
      var c = x < y ? -1 : (x > y ? 1 : 0);
      return descending ? -c : c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", descending ? "descending" : "ascending");
  }

  function applyFilters(table) {
    var id = table.id;
    var box = document.querySelector('input.filter-text[data-table="' + id + '"]');
    var needle = box ? box.value.trim().toLowerCase() : "";
    var selects = document.querySelectorAll('select.filter-select[data-table="' + id + '"]');
    var shown = 0;
    Array.prototype.forEach.call(table.tBodies[0].rows, function (row) {
      var ok = !needle || row.textContent.toLowerCase().indexOf(needle) !== -1;
      Array.prototype.forEach.call(selects, function (s) {
        if (ok && s.value && row.getAttribute("data-" + s.getAttribute("data-attr")) !== s.value) { ok = false; }
      });
      row.hidden = !ok;
      if (ok) { shown += 1; }
    });
    var count = document.querySelector('.filter-count[data-table="' + id + '"]');
    if (count) { count.textContent = shown + " of " + table.tBodies[0].rows.length + " rows"; }
  }

  function setUpTable(table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, index) {
      var numeric = th.getAttribute("data-type") === "num";
      th.tabIndex = 0;
      th.addEventListener("click", function () { sortTable(table, index, numeric, th); });
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortTable(table, index, numeric, th); }
      });
    });
    var controls = document.querySelectorAll('[data-table="' + table.id + '"]');
    Array.prototype.forEach.call(controls, function (c) {
      if (c.matches("input, select")) { c.addEventListener("input", function () { applyFilters(table); }); }
    });
    applyFilters(table);
  }


  // ---- grids ------------------------------------------------------------------------------

  function esc(text) {
    return String(text).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
      .replace(/"/g, "&quot;");
  }

  function fmtNum(v, digits) {
    if (v === null || v === undefined || v === "") { return ""; }
    if (typeof v !== "number") { return String(v); }
    if (v !== 0 && (Math.abs(v) >= 1e6 || Math.abs(v) < 1e-3)) { return v.toExponential(Math.max(digits - 1, 0)); }
    return String(Number(v.toPrecision(digits)));
  }

  function makeGrid(div) {
    var data = JSON.parse(document.getElementById(div.getAttribute("data-grid")).textContent);
    var cols = data.columns, rows = data.rows, pageSize = data.page_size || 100;
    var id = div.id, order = null, shown = null, page = 0, sortCol = -1, descending = false;
    var texts = rows.map(function (r) {
      return cols.map(function (c, i) { return r[i] === null ? "" : String(r[i]); }).join(" ").toLowerCase();
    });
    var controls = document.createElement("div");
    controls.className = "filters";
    var box = document.createElement("input");
    box.type = "search"; box.className = "filter-text"; box.placeholder = "filter rows (any text)";
    box.setAttribute("aria-label", "filter rows of " + (data.label || id));
    box.setAttribute("data-grid-control", id);
    controls.appendChild(box);
    var selects = [];
    (data.filters || []).forEach(function (f) {
      var label = document.createElement("label");
      label.textContent = f.label + " ";
      var sel = document.createElement("select");
      sel.className = "filter-select"; sel.setAttribute("data-attr", f.key); sel.setAttribute("data-grid-control", id);
      sel.innerHTML = '<option value="">all</option>' + f.choices.map(function (c) {
        return '<option value="' + esc(c) + '">' + esc(c) + "</option>";
      }).join("");
      label.appendChild(sel); controls.appendChild(label);
      selects.push({col: f.index, sel: sel});
    });
    var count = document.createElement("span");
    count.className = "filter-count"; count.setAttribute("aria-live", "polite");
    controls.appendChild(count);
    var table = document.createElement("table");
    table.className = "grid-table"; table.id = id + "-table";
    var colgroup = cols.map(function (c) {
      return c.width ? '<col style="width:' + c.width + 'px">' : "<col>";
    }).join("");
    table.innerHTML = "<colgroup>" + colgroup + "</colgroup><thead><tr>" + cols.map(function (c, i) {
      return '<th scope="col" tabindex="0" data-col="' + i + '"' + (c.kind === "num" ? ' class="num"' : "") +
        (c.title ? ' title="' + esc(c.title) + '"' : "") + ">" + esc(c.label) + "</th>";
    }).join("") + "</tr></thead><tbody></tbody>";
    var pager = document.createElement("div");
    pager.className = "pager";
    pager.innerHTML = '<button type="button" data-step="-1">‹ previous</button> <span class="page-of"></span> ' +
      '<button type="button" data-step="1">next ›</button>';
    var wrap = document.createElement("div");
    wrap.className = "grid-wrap";
    wrap.appendChild(table);
    div.appendChild(controls); div.appendChild(wrap); div.appendChild(pager);
    var body = table.tBodies[0];

    function cell(r, c, i) {
      var v = r[i];
      if (c.kind === "num") {
        var t = fmtNum(v, c.digits || 4);
        return '<td class="num">' + t + "</td>";
      }
      var text = v === null || v === undefined ? "" : String(v);
      var cls = c.kind === "status" && text ? ' class="status-' + esc(text.replace(/ /g, "-")) + '"' : (c.kind === "code" ? ' class="mono"' : "");
      var shownText = c.kind === "status" ? text.toUpperCase() : text;
      var inner = esc(shownText);
      if (c.href !== undefined && c.href !== null && r[c.href]) { inner = '<a href="' + esc(r[c.href]) + '">' + inner + "</a>"; }
      return "<td" + cls + (text.length > 24 ? ' title="' + esc(text) + '"' : "") + ">" + inner + "</td>";
    }

    function draw() {
      var pages = Math.max(1, Math.ceil(shown.length / pageSize));
      if (page >= pages) { page = pages - 1; }
      var start = page * pageSize, end = Math.min(shown.length, start + pageSize);
      var html = [];
      for (var k = start; k < end; k++) {
        var r = rows[shown[k]];
        var tr = "<tr>";
        for (var i = 0; i < cols.length; i++) { tr += cell(r, cols[i], i); }
        html.push(tr + "</tr>");
      }
      body.innerHTML = html.join("");
      count.textContent = shown.length + " of " + rows.length + " rows";
      pager.querySelector(".page-of").textContent = shown.length ?
        "rows " + (start + 1) + "–" + end + " of " + shown.length : "no row matches";
      pager.querySelector('[data-step="-1"]').disabled = page === 0;
      pager.querySelector('[data-step="1"]').disabled = page >= pages - 1;
      pager.hidden = pages < 2;
    }

    function filter() {
      var needle = box.value.trim().toLowerCase();
      var wanted = selects.map(function (s) { return s.sel.value; });
      shown = order.filter(function (n) {
        if (needle && texts[n].indexOf(needle) === -1) { return false; }
        for (var s = 0; s < selects.length; s++) {
          if (wanted[s] && String(rows[n][selects[s].col]) !== wanted[s]) { return false; }
        }
        return true;
      });
      page = 0;
      draw();
    }

    function sortBy(i) {
      descending = sortCol === i ? !descending : false;
      sortCol = i;
      var numeric = cols[i].kind === "num";
      var keyed = rows.map(function (r, n) {
        var v = r[i];
        if (v === null || v === undefined || v === "") { v = null; } else if (!numeric) { v = String(v).toLowerCase(); }
        return [v, n];
      });
      keyed.sort(function (a, b) {
        if (a[0] === null && b[0] === null) { return a[1] - b[1]; }
        if (a[0] === null) { return 1; }   // empty cells last, either way
        if (b[0] === null) { return -1; }
        var c = a[0] < b[0] ? -1 : (a[0] > b[0] ? 1 : a[1] - b[1]);
        return descending ? -c : c;
      });
      order = keyed.map(function (k) { return k[1]; });
      Array.prototype.forEach.call(table.tHead.rows[0].cells, function (h) { h.removeAttribute("aria-sort"); });
      table.tHead.rows[0].cells[i].setAttribute("aria-sort", descending ? "descending" : "ascending");
      filter();
    }

    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (th, i) {
      th.addEventListener("click", function () { sortBy(i); });
      th.addEventListener("keydown", function (e) {
        if (e.key === "Enter" || e.key === " ") { e.preventDefault(); sortBy(i); }
      });
    });
    box.addEventListener("input", filter);
    selects.forEach(function (s) { s.sel.addEventListener("input", filter); });
    pager.addEventListener("click", function (e) {
      var step = e.target.getAttribute && e.target.getAttribute("data-step");
      if (step) { page += Number(step); draw(); }
    });
    order = rows.map(function (r, n) { return n; });
    filter();
    return {
      view: function () { return shown.map(function (n) { return rows[n]; }); },
      columns: cols.map(function (c) { return c.label; }),
      setFilter: function (text) { box.value = text; filter(); },
      select: function (key, value) {
        selects.forEach(function (s) { if (s.sel.getAttribute("data-attr") === key) { s.sel.value = value; } });
        filter();
      },
      sortBy: sortBy
    };
  }

  function setUpGrids() {
    window.harnessGrids = {};
    Array.prototype.forEach.call(document.querySelectorAll("div.grid[data-grid]"), function (div) {
      window.harnessGrids[div.id] = makeGrid(div);
    });
    // A link with data-grid-filter="GRID:KEY=VALUE" sets that grid's KEY select to VALUE (the
    // text filter cleared) and scrolls to it; "GRID:TEXT" filters it by TEXT.
    document.addEventListener("click", function (e) {
      var a = e.target.closest ? e.target.closest("a[data-grid-filter]") : null;
      if (!a) { return; }
      var spec = a.getAttribute("data-grid-filter"), cut = spec.indexOf(":");
      var grid = window.harnessGrids[spec.slice(0, cut)], what = spec.slice(cut + 1), eq = what.indexOf("=");
      if (!grid) { return; }
      if (eq > 0) { grid.setFilter(""); grid.select(what.slice(0, eq), what.slice(eq + 1)); } else { grid.setFilter(what); }
    });
  }

  function embedCharts() {
    window.harnessCharts = {};
    var divs = document.querySelectorAll("div.chart[data-spec]");
    if (!divs.length) { window.harnessChartsDone = performance.now(); return; }
    if (typeof window.vegaEmbed !== "function") {
      console.error("the Vega bundle is missing from this page");
      return;
    }
    var pending = divs.length;
    function settled() {
      pending -= 1;
      if (pending === 0) { window.harnessChartsDone = performance.now(); }
    }
    Array.prototype.forEach.call(divs, function (div) {
      var spec = JSON.parse(document.getElementById(div.getAttribute("data-spec")).textContent);
      // Many marks draw faster on a canvas; the chart's box says which (data-renderer).
      var renderer = div.getAttribute("data-renderer") || "svg";
      var options = {renderer: renderer, actions: {export: true, source: false, compiled: false, editor: false}};
      window.vegaEmbed(div, spec, options).then(function (result) {
        window.harnessCharts[div.id] = result.view;
        div.setAttribute("data-rendered", "1");
        settled();
      }).catch(function (err) {
        div.textContent = "chart could not be drawn: " + err;
        console.error(err);
        settled();
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), setUpTable);
    setUpGrids();
    window.harnessReady = performance.now();  // the summaries and tables are usable from here
    // Charts after the first paint: the tables and summaries show while Vega draws.
    window.setTimeout(embedCharts, 0);
  });
})();

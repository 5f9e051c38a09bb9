// Tables: click a header to sort (again to reverse); the filter box and selects hide rows.
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

  function embedCharts() {
    window.harnessCharts = {};
    var divs = document.querySelectorAll("div.chart[data-spec]");
    if (!divs.length) { return; }
    if (typeof window.vegaEmbed !== "function") {
      console.error("the Vega bundle is missing from this page");
      return;
    }
    Array.prototype.forEach.call(divs, function (div) {
      var spec = JSON.parse(document.getElementById(div.getAttribute("data-spec")).textContent);
      var options = {renderer: "svg", actions: {export: true, source: false, compiled: false, editor: false}};
      window.vegaEmbed(div, spec, options).then(function (result) {
        window.harnessCharts[div.id] = result.view;
        div.setAttribute("data-rendered", "1");
      }).catch(function (err) {
        div.textContent = "chart could not be drawn: " + err;
        console.error(err);
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), setUpTable);
    embedCharts();
  });
})();

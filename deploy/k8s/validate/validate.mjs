// Validates Kubernetes manifests offline against the API schemas of kubernetes-models (the
// OpenAPI schemas of Kubernetes, compiled to JSON-schema validators). Input on stdin: a JSON
// array of {file, doc} (scripts/k8s-validate converts the YAML). Exit 0 when every document
// validates; else 1, one line per problem: FILE: KIND NAME: path message.
import { createRequire } from "node:module";
import { readFileSync } from "node:fs";

const docs = JSON.parse(readFileSync(0, "utf8"));
let bad = 0;
for (const { file, doc } of docs) {
  const what = `${file}: ${doc.kind ?? "?"} ${doc.metadata?.name ?? "?"}`;
  if (!doc.apiVersion || !doc.kind) {
    console.log(`${what}: apiVersion and kind are required`);
    bad++;
    continue;
  }
  const path = `kubernetes-models/${doc.apiVersion}/${doc.kind}`;
  let Model;
  try {
    Model = (await import(path)).default ?? (await import(path))[doc.kind];
  } catch (e) {
    console.log(`${what}: unknown apiVersion/kind ${doc.apiVersion} ${doc.kind}`);
    bad++;
    continue;
  }
  try {
    new Model(doc).validate();
    console.log(`ok ${what}`);
  } catch (e) {
    const details = (e.errors ?? []).map((x) => `${x.instancePath || "/"} ${x.message}`);
    console.log(`${what}: ${details.length ? details.join("; ") : e.message}`);
    bad++;
  }
}
process.exit(bad ? 1 : 0);

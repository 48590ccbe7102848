// Builds the client into ../gateway/static/ and copies Swagger UI and ReDoc beside it, so the
// gateway serves every page from its own origin. `node build.mjs` (npm run build).
import { build } from "esbuild";
import { cpSync, mkdirSync, rmSync, copyFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = join(here, "..", "gateway", "static");
const modules = join(here, "node_modules");

rmSync(out, { recursive: true, force: true });
mkdirSync(join(out, "swagger"), { recursive: true });
mkdirSync(join(out, "redoc"), { recursive: true });

await build({
  entryPoints: [join(here, "src", "main.tsx")],
  bundle: true,
  minify: true,
  sourcemap: true,
  format: "esm",
  target: ["es2020"],
  jsx: "automatic",
  jsxImportSource: "preact",
  outfile: join(out, "app.js"),
  logLevel: "warning",
});
copyFileSync(join(modules, "highlight.js", "styles", "github.css"), join(out, "hljs.css"));
for (const file of ["index.html", "app.css", "favicon.svg", "push-sw.js"]) {
  copyFileSync(join(here, "public", file), join(out, file));
}
for (const file of ["swagger-ui-bundle.js", "swagger-ui.css", "LICENSE"]) {
  copyFileSync(join(modules, "swagger-ui-dist", file), join(out, "swagger", file));
}
cpSync(join(modules, "redoc", "bundles", "redoc.standalone.js"), join(out, "redoc", "redoc.standalone.js"));
cpSync(join(modules, "redoc", "LICENSE"), join(out, "redoc", "LICENSE"));
console.log(`built the web client into ${out}`);

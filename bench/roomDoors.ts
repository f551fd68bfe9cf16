/**
 * node -r ./test/support/swcRegister.js bench/roomDoors.ts [dry]: routes every import that enters a room from outside
 * (layers.json `rooms`; docs/architecture.md, Rooms) through the index.ts of the innermost room holding the file, and
 * adds to each index.ts the re-exports its users need (a type as `export type`, found by the type checker); imports of
 * one file through one door become one. Run after adding rooms or moving files, then `npx prettier --write` the files
 * it changed. It leaves workflows/, the pending paths, src/config.ts's settings readers and the workflow bundle's value
 * imports as they are, and reports the namespace imports (`import * as`) it cannot rewrite. `dry`: only counts the
 * re-exports.
 */
import ts from 'typescript';
import fs from 'node:fs';
import path from 'node:path';
import { files, edges, root } from '../test/support/importGraph';
const L = JSON.parse(fs.readFileSync(path.join(root, 'layers.json'), 'utf8'));
const R = L.rooms;
const rooms: string[] = R.folders;
const pending: string[] = R.pending.flatMap((p: any) => p.paths);
const isPending = (f: string) => pending.some((p) => (p.endsWith('.ts') ? f === p : f.startsWith(p + '/')));
const inside = (f: string, room: string) => f.startsWith(room + '/');
// workflow bundle: value closure from workflows/
const valueNext = new Map(files.map((f, i) => [f, edges[i].filter((e) => e.value).map((e) => e.to)]));
const bundle = new Set<string>();
const stack = files.filter((f) => f.startsWith('workflows/'));
while (stack.length) {
  const f = stack.pop()!;
  if (bundle.has(f)) continue;
  bundle.add(f);
  stack.push(...(valueNext.get(f) ?? []));
}

const layerEx = (from: string, to: string) =>
  L.exceptions.some((e: { from: string; to: string[] }) => e.from === from && e.to.includes(to));
/** The door a file `from` must use to reach `to`: the index.ts of the innermost room holding `to`, if not `from`. */
function door(from: string, to: string): string | null {
  if (isPending(to) || layerEx(from, to)) return null;
  const d = rooms.filter((r) => inside(to, r)).sort((a, b) => b.length - a.length)[0];
  if (d === undefined || inside(from, d) || to === `${d}/index.ts`) return null;
  return d;
}
const program = ts.createProgram(
  files.map((f) => path.join(root, f)),
  {
    ...ts.readConfigFile(path.join(root, 'tsconfig.json'), ts.sys.readFile).config.compilerOptions,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    module: ts.ModuleKind.CommonJS,
    target: ts.ScriptTarget.ES2022,
    noEmit: true,
  },
);
const checker = program.getTypeChecker();
const isValueExport = (file: string, name: string): boolean => {
  const sf = program.getSourceFile(path.join(root, file))!;
  const ms = checker.getSymbolAtLocation(sf)!;
  const exp = checker.getExportsOfModule(ms).find((s) => s.name === name);
  if (!exp) throw new Error(`${file} has no export ${name}`);
  let s = exp;
  if (s.flags & ts.SymbolFlags.Alias) s = checker.getAliasedSymbol(s);
  return !!(s.flags & ts.SymbolFlags.Value);
};
function symbolOf(file: string, name: string): ts.Symbol | undefined {
  const sf = program.getSourceFile(path.join(root, file))!;
  const ms = checker.getSymbolAtLocation(sf);
  if (!ms) return undefined;
  let s = checker.getExportsOfModule(ms).find((x) => x.name === name);
  while (s && s.flags & ts.SymbolFlags.Alias) s = checker.getAliasedSymbol(s);
  return s;
}
// exports wanted: door/index chain: room -> list of {fromSpec (relative to room), name, value}
type Want = { file: string; name: string; value: boolean };
const wants = new Map<string, Map<string, Want>>(); // room -> exportedName -> want
const resolveSpec = (from: string, spec: string) => {
  const t = path.posix.normalize(path.posix.join(path.posix.dirname(from), spec));
  for (const c of [`${t}.ts`, `${t}/index.ts`]) if (fs.existsSync(path.join(root, c))) return c;
  return null;
};
/** `d`'s index.ts exports `name` of `file` (through the nested rooms' index.ts); returns the name it exports. */
function want(d: string, file: string, name: string, value: boolean): string {
  // chain: d, then nested rooms inside d holding file
  const chain = rooms.filter((r) => inside(file, r) && (r === d || inside(r, d))).sort((a, b) => a.length - b.length);
  let exported = name;
  for (let i = chain.length - 1; i >= 0; i--) {
    const room = chain[i];
    const src = i === chain.length - 1 ? file : `${chain[i + 1]}/index.ts`;
    if (src === `${room}/index.ts`) continue;
    if (!wants.has(room)) wants.set(room, new Map());
    const m = wants.get(room)!;
    let out = exported;
    if (!m.has(out) && fs.existsSync(path.join(root, room, 'index.ts')) && src !== `${room}/index.ts`) {
      const have = symbolOf(`${room}/index.ts`, out);
      if (have) {
        if (have === symbolOf(src, exported)) {
          exported = out;
          continue;
        }
        m.set(out, { file: `${room}/index.ts`, name: out, value: true });
      }
    }
    const clash = m.get(out);
    const same = (w: Want) =>
      (w.file === src && w.name === exported) || symbolOf(w.file, w.name) === symbolOf(src, exported);
    if (clash && same(clash)) {
      m.set(out, { ...clash, value: clash.value || value });
      exported = out;
      continue;
    }
    if (clash) {
      const base = path
        .basename(src === `${chain[i + 1]}/index.ts` ? chain[i + 1] : file, '.ts')
        .replace(/[^A-Za-z0-9]+(.)/g, (_, c) => c.toUpperCase());
      out = `${base}${exported[0].toUpperCase()}${exported.slice(1)}`;
      const again = m.get(out);
      if (again && !same(again)) throw new Error(`clash ${room} ${out}`);
      console.error(`renamed in ${room}: ${exported} of ${src} as ${out}`);
    }
    const prev = m.get(out);
    m.set(out, { file: src, name: exported, value: value || !!prev?.value });
    exported = out;
  }
  return exported;
}
interface Edit {
  start: number;
  end: number;
  head: string;
  spec: string;
  parts: string[];
  text?: string;
}
const edits = new Map<string, Edit[]>();
/** The end of a statement's line, its newline included (a statement merged into another leaves no blank line). */
const text0 = (text: string, end: number) => (text[end] === '\n' ? end + 1 : end);
const skipped: string[] = [];
for (const f of files) {
  if (f.startsWith('workflows/') || isPending(f)) continue;
  const sf = program.getSourceFile(path.join(root, f))!;
  for (const st of sf.statements) {
    if (!(ts.isImportDeclaration(st) || ts.isExportDeclaration(st)) || !st.moduleSpecifier) continue;
    const spec = (st.moduleSpecifier as ts.StringLiteral).text;
    if (!spec.startsWith('.')) continue;
    const to = resolveSpec(f, spec);
    if (!to) continue;
    const d = door(f, to);
    if (!d) continue;
    const stmtType = ts.isImportDeclaration(st) ? !!st.importClause?.isTypeOnly : st.isTypeOnly;
    if (bundle.has(f) && !stmtType) {
      // a value import of the workflow bundle stays direct unless every name is a type
      const names = ts.isImportDeclaration(st)
        ? st.importClause?.namedBindings && ts.isNamedImports(st.importClause.namedBindings)
          ? st.importClause.namedBindings.elements
          : null
        : st.exportClause && ts.isNamedExports(st.exportClause)
          ? st.exportClause.elements
          : null;
      if (!names || names.some((n) => !n.isTypeOnly)) {
        skipped.push(`${f} -> ${to} (workflow bundle)`);
        continue;
      }
    }
    let newSpec = path.posix.relative(path.posix.dirname(f), d);
    if (!newSpec.startsWith('.')) newSpec = './' + newSpec;
    const el = ts.isImportDeclaration(st)
      ? st.importClause?.namedBindings && ts.isNamedImports(st.importClause.namedBindings) && !st.importClause.name
        ? st.importClause.namedBindings.elements
        : null
      : st.exportClause && ts.isNamedExports(st.exportClause)
        ? st.exportClause.elements
        : null;
    if (!el) {
      skipped.push(`${f}: ${st.getText(sf).slice(0, 100)}`);
      continue;
    }
    const parts = el.map((e) => {
      const name = (e.propertyName ?? e.name).text;
      const local = e.name.text;
      const isT = stmtType || e.isTypeOnly;
      const value = !isT && isValueExport(to, name);
      const exported = want(d, to, name, value);
      return `${e.isTypeOnly ? 'type ' : ''}${exported === local ? local : `${exported} as ${local}`}`;
    });
    const kw = ts.isImportDeclaration(st) ? 'import' : 'export';
    const head = `${kw} ${stmtType ? 'type ' : ''}`;
    if (!edits.has(f)) edits.set(f, []);
    // Statements of one file through the same door become one.
    const same = edits.get(f)!.find((e) => e.head === head && e.spec === newSpec);
    if (same) {
      for (const p of parts) if (!same.parts.includes(p)) same.parts.push(p);
      const end = text0(sf.text, st.getEnd());
      edits.get(f)!.push({ start: st.getStart(sf), end, head: '', spec: '', parts: [] });
    } else edits.get(f)!.push({ start: st.getStart(sf), end: st.getEnd(), head, spec: newSpec, parts });
  }
}
for (const es of edits.values())
  for (const e of es) e.text = e.head ? `${e.head}{ ${e.parts.join(', ')} } from '${e.spec}';` : '';
console.error('skipped:\n' + skipped.join('\n'));
if (process.argv[2] === 'dry') {
  for (const [r, m] of wants) console.log(r, m.size);
  process.exit(0);
}
console.error(
  'edits',
  [...edits.values()].reduce((a, e) => a + e.length, 0),
);
for (const [f, es] of edits) {
  let text = fs.readFileSync(path.join(root, f), 'utf8');
  for (const e of es.sort((a, b) => b.start - a.start)) text = text.slice(0, e.start) + e.text! + text.slice(e.end);
  fs.writeFileSync(path.join(root, f), text);
}
for (const [room, m] of wants) {
  const idx = path.join(root, room, 'index.ts');
  const existing = fs.existsSync(idx) ? fs.readFileSync(idx, 'utf8') : '';
  const bySrc = new Map<string, { v: string[]; t: string[] }>();
  for (const [out, w] of m) {
    if (w.file === `${room}/index.ts`) continue;
    let rel = path.posix.relative(room, w.file).replace(/(\/index)?\.ts$/, '');
    if (!rel.startsWith('.')) rel = './' + rel;
    if (!bySrc.has(rel)) bySrc.set(rel, { v: [], t: [] });
    const e = out === w.name ? out : `${w.name} as ${out}`;
    (w.value ? bySrc.get(rel)!.v : bySrc.get(rel)!.t).push(e);
  }
  const lines: string[] = [];
  for (const [rel, { v, t }] of [...bySrc].sort()) {
    if (v.length) lines.push(`export { ${v.sort().join(', ')} } from '${rel}';`);
    if (t.length) lines.push(`export type { ${t.sort().join(', ')} } from '${rel}';`);
  }
  const head = existing
    ? ''
    : `/**\n * The ${room.replace(/^src\//, '')} room's door: what the rest of the gateway uses of it ` +
      `(docs/architecture.md, Rooms).\n */\n`;
  if (!lines.length) continue;
  fs.writeFileSync(
    idx,
    existing ? existing.trimEnd() + '\n\n' + lines.join('\n') + '\n' : head + lines.join('\n') + '\n',
  );
}

import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { URL } from 'node:url';
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

/*
 * The layers (layers.json, docs/architecture.md): a file may import from its own layer or below, never above.
 * no-restricted-imports sees the import as written, so each layer forbids the relative paths that lead to a higher
 * layer's folders and files; test/unit/project/layers.test.ts checks the same on the resolved files, and the cycles.
 */
const LAYERS = JSON.parse(readFileSync(new URL('./layers.json', import.meta.url), 'utf8'));
const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
/** A relative specifier that reaches `item` (a folder or a .ts file of the repository) from any depth. */
function reaching(item) {
  const file = item.endsWith('.ts');
  const name = escape(file ? item.slice(0, -3) : item).replace(/^src\//, '(?:src/)?');
  return `(?:\\.\\.?/)+${name}${file ? '' : '(?:/.*)?'}`;
}
function layerRules() {
  return LAYERS.layers.flatMap((layer, i) => {
    const above = LAYERS.layers.slice(0, i);
    if (!above.length) return [];
    const items = above.flatMap((l) => [...l.files, ...l.folders]);
    const own = [...layer.files, ...layer.folders.map((f) => `${f}/**/*.ts`)];
    const rule = (allowed) => [
      'error',
      {
        patterns: [
          {
            regex: `^${allowed}(?:${items.map(reaching).join('|')})$`,
            caseSensitive: true,
            message: `The ${layer.name} layer imports only from its own layer or below (docs/architecture.md).`,
          },
        ],
      },
    ];
    const exceptions = LAYERS.exceptions.filter((e) => own.some((g) => g === e.from));
    return [
      {
        files: own,
        ignores: exceptions.map((e) => e.from),
        rules: { 'no-restricted-imports': rule('') },
      },
      ...exceptions.map((e) => {
        const specs = e.to.map((t) => {
          const rel = path.posix.relative(path.posix.dirname(e.from), t.slice(0, -3));
          return escape(rel.startsWith('.') ? rel : `./${rel}`);
        });
        return { files: [e.from], rules: { 'no-restricted-imports': rule(`(?!(?:${specs.join('|')})$)`) } };
      }),
    ];
  });
}

/*
 * The rooms (layers.json `rooms`, docs/architecture.md): a file outside a room imports only the room's index.ts. The
 * rule resolves each relative import to its file, so it sees the same graph as test/unit/project/rooms.test.ts, which
 * also checks the cycles between rooms. The folders `pending` names are skipped; workflows/ too (its bundle imports
 * inner files: an index.ts would bring the room's I/O into the sandbox).
 */
const ROOT = path.dirname(new URL(import.meta.url).pathname);
const ROOMS = LAYERS.rooms;
const PENDING = ROOMS.pending.flatMap((p) => p.paths);
const inside = (file, folder) => file.startsWith(`${folder}/`);
const isPending = (file) => PENDING.some((p) => file === p || inside(file, p));
const settingsRead = (from, to) => LAYERS.exceptions.some((e) => e.from === from && e.to.includes(to));
function resolved(from, spec) {
  const target = path.posix.normalize(path.posix.join(path.posix.dirname(from), spec));
  return [`${target}.ts`, `${target}/index.ts`].find((c) => existsSync(path.join(ROOT, c))) ?? null;
}
const roomsPlugin = {
  rules: {
    door: {
      meta: { type: 'problem', schema: [] },
      create(context) {
        const from = path.relative(ROOT, context.filename).split(path.sep).join('/');
        if (isPending(from)) return {};
        const check = (node) => {
          const spec = node.source?.value;
          if (typeof spec !== 'string' || !spec.startsWith('.')) return;
          const to = resolved(from, spec);
          if (!to || isPending(to) || settingsRead(from, to)) return;
          // The innermost room holding the file: a nested room's index.ts is a door of its own.
          const room = ROOMS.folders.filter((r) => inside(to, r)).sort((a, b) => b.length - a.length)[0];
          if (room && !inside(from, room) && to !== `${room}/index.ts`)
            context.report({
              node: node.source,
              message: `${room}/ is a room: import its index.ts, not ${to} (docs/architecture.md, Rooms).`,
            });
        };
        return { ImportDeclaration: check, ExportNamedDeclaration: check, ExportAllDeclaration: check };
      },
    },
  },
};

export default tseslint.config(
  {
    ignores: [
      'dist/**',
      'node_modules/**',
      'coverage/**',
      'test-artifacts/**',
      'src/console/static/vendor/**',
      '.data/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': [
        'error',
        { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' },
      ],
      'no-empty': ['error', { allowEmptyCatch: true }],
      // Prettier breaks code at 120 but not strings, template literals or comments: those are wrapped by hand.
      'max-len': ['error', { code: 120, ignoreUrls: true }],
    },
  },
  ...layerRules(),
  {
    files: ['src/**/*.ts', 'activities/**/*.ts'],
    plugins: { rooms: roomsPlugin },
    rules: { 'rooms/door': 'error' },
  },
  {
    files: ['**/*.js', '**/*.cjs'],
    languageOptions: {
      globals: {
        module: 'writable',
        require: 'readonly',
        process: 'readonly',
        __dirname: 'readonly',
        console: 'readonly',
      },
    },
    rules: { '@typescript-eslint/no-require-imports': 'off' },
  },
  {
    // The console's front end: ES modules loaded by the browser (no build step).
    files: ['src/console/static/**/*.js'],
    languageOptions: {
      sourceType: 'module',
      globals: Object.fromEntries(
        [
          'document',
          'window',
          'fetch',
          'navigator',
          'history',
          'location',
          'setTimeout',
          'clearTimeout',
          'setInterval',
          'clearInterval',
          'crypto',
          'URLSearchParams',
          'URL',
          'Node',
          'Blob',
          'FormData',
          'requestAnimationFrame',
          'getComputedStyle',
          'alert',
          'confirm',
          'matchMedia',
          'Event',
          'KeyboardEvent',
        ].map((name) => [name, 'readonly']),
      ),
    },
  },
);

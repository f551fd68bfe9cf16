import { readFileSync } from 'node:fs';
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
/** A path of layers.json as a pattern: its `*` stands for any one path segment (src/jobs/<kind>/workflow.ts). */
const pattern = (p) => escape(p).replace(/\\\*/g, '[^/]+');
/** A relative specifier that reaches `item` (a folder or a .ts file of the repository) from any depth. */
function reaching(item) {
  const file = item.endsWith('.ts');
  const name = pattern(file ? item.slice(0, -3) : item).replace(/^src\//, '(?:src/)?');
  // A folder at the root (workflows/, activities/) is reached only by climbing (`./activities` is a sibling file).
  const climb = item.startsWith('src/') ? '(?:\\.\\.?/)+' : '(?:\\.\\./)+';
  return `${climb}${name}${file ? '' : '(?:/.*)?'}`;
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
    // A file another layer names (a kind's workflow in src/jobs/<kind>/) is that layer's, not its folder's.
    const elsewhere = LAYERS.layers.flatMap((l) => (l === layer ? [] : l.files));
    return [
      {
        files: own,
        ignores: [...exceptions.map((e) => e.from), ...elsewhere],
        rules: { 'no-restricted-imports': rule('') },
      },
      ...exceptions.map((e) => {
        const specs = e.to.map((t) => {
          const rel = path.posix.relative(path.posix.dirname(e.from), t.slice(0, -3));
          return pattern(rel.startsWith('.') ? rel : `./${rel}`);
        });
        return { files: [e.from], rules: { 'no-restricted-imports': rule(`(?!(?:${specs.join('|')})$)`) } };
      }),
    ];
  });
}

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

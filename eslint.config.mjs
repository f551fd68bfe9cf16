import js from '@eslint/js';
import tseslint from 'typescript-eslint';

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

/**
 * Lets a child `node` process run the TypeScript sources directly (node -r ./test/support/swcRegister.js x.ts),
 * compiled by @swc/core the same way jest does. Used by tests that must SIGKILL a real worker process.
 */
const fs = require('node:fs');
const { transformSync } = require('@swc/core');

require.extensions['.ts'] = function compileTs(module, filename) {
  const out = transformSync(fs.readFileSync(filename, 'utf8'), {
    filename,
    sourceMaps: 'inline',
    jsc: { target: 'es2022', parser: { syntax: 'typescript' } },
    module: { type: 'commonjs' },
  });
  module._compile(out.code, filename);
};

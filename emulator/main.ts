import { startEmulator } from './server';

/**
 * Standalone emulator: `npm run emulator` (PORT or EMULATOR_PORT, default 4010). EMULATOR_HOST (default
 * 127.0.0.1) is the bind address; docker-compose sets 0.0.0.0 so the API container can reach it.
 */
const port = Number(process.env.EMULATOR_PORT ?? process.env.PORT ?? 4010);
const host = process.env.EMULATOR_HOST || '127.0.0.1';
startEmulator({ port, host }).then((e) =>
  console.log(JSON.stringify({ msg: 'provider emulator listening', url: e.url, host })),
);

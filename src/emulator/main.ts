import { startEmulator } from './server';

/** Standalone emulator: `npm run emulator` (PORT or EMULATOR_PORT, default 4010). */
const port = Number(process.env.EMULATOR_PORT ?? process.env.PORT ?? 4010);
startEmulator({ port }).then((e) => console.log(JSON.stringify({ msg: 'provider emulator listening', url: e.url })));

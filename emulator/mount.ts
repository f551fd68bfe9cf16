import type Router from '@koa/router';
import type { EmulatorControl } from './control';

/** How a protocol module adds its routes to the emulator (emulator/protocols.ts lists them). */
export type Mount = (router: Router, ctl: EmulatorControl, baseUrl: () => string) => void;

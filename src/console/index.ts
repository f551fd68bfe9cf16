/**
 * The console room's door: what the rest of the gateway uses of it (docs/architecture.md, Rooms).
 */
export { consoleRouter } from './router';
export { createLogin, findLoginByEmail, listLogins, setLoginDisabled, setPassword } from './users';
export type { Role } from './users';

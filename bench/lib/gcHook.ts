import v8 from 'node:v8';

/**
 * Preloaded (`--expose-gc --require dist/bench/lib/gcHook.js`) into a process the soak forks from the production
 * entry point (dist/src/server.js), which it leaves untouched: on {type:'gc'} it collects garbage twice (a
 * second pass frees what the first one's finalizers released) and answers with process.memoryUsage(); on
 * {type:'heap', file} it writes a heap snapshot there, to see what is retained.
 */
const gc = (globalThis as { gc?: () => void }).gc;
process.on('message', (m: { type?: string; file?: string }) => {
  if (m?.type === 'gc') {
    gc?.();
    gc?.();
    process.send?.({ type: 'gc', forced: gc !== undefined, ...process.memoryUsage() });
  } else if (m?.type === 'heap' && m.file) {
    process.send?.({ type: 'heap', file: v8.writeHeapSnapshot(m.file) });
  }
});
// The IPC channel must not keep the server alive once it has closed (SIGTERM), nor stop it when the soak exits.
process.channel?.unref();

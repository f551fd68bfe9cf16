const { TestEnvironment } = require('jest-environment-node');

/**
 * Node's test environment, plus: the gateway log lines a test produced (buffered by test/support/quietLogs.ts)
 * are printed to stderr when that test, or a hook before it, fails; otherwise they are dropped. And the running
 * test's or hook's deadline (its jest timeout), which test/support/eventually.ts waits within. And, for integration
 * files, the jest worker's own database.
 */
class LogEnvironment extends TestEnvironment {
  constructor(config, context) {
    // The worker's own database (test/support/globalSetup.ts), set before the sandbox copies process.env and for
    // the child processes that tests start.
    const own = JSON.parse(process.env.GW_TEST_WORKER_DATABASES ?? '[]')[Number(process.env.JEST_WORKER_ID ?? 1) - 1];
    if (own) process.env.DATABASE_URL = own;
    super(config, context);
    this.lines = [];
    this.global.__gatewayLogLines = this.lines;
  }

  handleTestEvent(event, state) {
    this.track(event, state);
    if (event.name === 'test_start') this.lines.length = 0;
    else if (event.name === 'test_done' && event.test.errors.length > 0) this.print(`test "${event.test.name}"`);
    else if (event.name === 'hook_failure') this.print(`${event.hook.type} hook`);
  }

  /** A fresh record per test or hook: a wait left polling by an ended one sees `ended`, not the next one's time. */
  track(event, state) {
    const name = event.name;
    if (name === 'test_fn_start' || name === 'hook_start') {
      const timeout = (name === 'hook_start' ? event.hook.timeout : event.test.timeout) || state.testTimeout;
      this.global.__gwTestRun = { deadline: Date.now() + timeout, ended: false };
    } else if (/^(test_fn|hook)_(success|failure)$/.test(name) && this.global.__gwTestRun) {
      this.global.__gwTestRun.ended = true;
      this.global.__gwTestRun = undefined;
    }
  }

  print(what) {
    if (this.lines.length === 0) return;
    process.stderr.write(
      `\n--- gateway logs of the failed ${what} ---\n${this.lines.join('')}--- end of gateway logs ---\n`,
    );
    this.lines.length = 0;
  }
}

module.exports = LogEnvironment;

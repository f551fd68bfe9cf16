const { TestEnvironment } = require('jest-environment-node');

/**
 * Node's test environment, plus: the gateway log lines a test produced (buffered by test/support/quietLogs.ts)
 * are printed to stderr when that test, or a hook before it, fails; otherwise they are dropped.
 */
class LogEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    this.lines = [];
    this.global.__gatewayLogLines = this.lines;
  }

  handleTestEvent(event) {
    if (event.name === 'test_start') this.lines.length = 0;
    else if (event.name === 'test_done' && event.test.errors.length > 0) this.print(`test "${event.test.name}"`);
    else if (event.name === 'hook_failure') this.print(`${event.hook.type} hook`);
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

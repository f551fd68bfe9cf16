import { logTo } from '../../src/observability/logger';

/**
 * The gateway's JSON logs stay out of a passing run: without LOG_LEVEL they go to an in-memory buffer that
 * test/support/logEnvironment.js prints when a test fails and empties when the next test starts.
 * With LOG_LEVEL set they go to stdout as in production.
 */
const MAX_LINES = 2000; // the tail of a long test is the part that explains its failure

// The AWS SDK's notice about future Node versions would otherwise open every run that touches S3.
process.env.AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED ??= 'true';

if (!process.env.LOG_LEVEL) {
  const lines = ((globalThis as any).__gatewayLogLines ??= []) as string[];
  logTo({
    write(line: string) {
      lines.push(line);
      if (lines.length > MAX_LINES) lines.splice(0, lines.length - MAX_LINES);
    },
  });
}

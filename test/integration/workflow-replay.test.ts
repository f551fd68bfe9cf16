import fs from 'node:fs';
import path from 'node:path';
import { bundleWorkflowCode, Worker } from '@temporalio/worker';
import * as proto from '@temporalio/proto';
import { patchProtobufRoot } from '@temporalio/proto/lib/patch-protobuf-root';
import { installRuntime } from '../../src/worker';

/**
 * The video workflow replays the histories of jobs run by earlier builds: from main at 8f48ea2 (before the workflow
 * was restructured into steps under one cancellation scope, with no patch markers) a completed Seedance job with its
 * last frame, a completed Veo job, a provider failure and a cancel while processing; from main at 1abc0f8 (`main-`
 * files: every patch taken, webhook events emitted, the contract still spread over four files) the same four and a
 * Veo job cancelled while processing whose task is followed to its end. A worker running this code must be able to
 * pick up jobs that the previous deployment started; a change to the workflow that would break them (another
 * activity order, a timer added or removed) fails here as a nondeterminism error. Record new histories with
 * `temporal workflow show --workflow-id video-<job> --output json` when the workflow changes on purpose (with
 * `patched()` for the jobs still in flight).
 *
 * The batch workflow likewise (recorded by test/integration/record-batch-histories.test.ts): from main at a173d94
 * (`main-a173d94-`, before `patched('batch-native-follows-upstream')`) a routed batch, a native batch completed, one
 * cancelled while queued at its provider and one whose status reads kept failing (it failed there, the provider's
 * batch left running: replaying it proves the new native branch is behind its patch); and with the patch taken
 * (`issue34-`) the same four and a native batch whose status read was refused for good (cancelled there, collected);
 * and with `patched('batch-fewer-turns')` taken (`issue46-turns-`: openBatch, runChunkInSlot, finalizeBatch marking
 * finalizing) the same five.
 *
 * The reconciliation workflow (recorded by test/integration/record-reconcile-histories.test.ts): from main at c44ead4
 * (before its activity heartbeated, with other activity timeouts) a day within the drift threshold and one past it
 * (the operator told).
 *
 * The background response workflow (recorded by test/integration/record-background-histories.test.ts): from main at
 * e407a5d (`main-e407a5d-bgresp-`, before `patched('background-run-own-queue')`: markInProgress, then the run on the
 * workflow's own queue) a completed response and one cancelled mid-answer; and with the patch taken
 * (`issue38-run-queue-bgresp-`: the run on the background runs' queue, no markInProgress) the same two.
 */

const dir = path.join(__dirname, '../fixtures/workflow-histories');

/**
 * A history in the CLI's proto JSON as the History message. (@temporalio/common's historyFromJSON fails here with
 * "type must be a Type": npm installs protobufjs 8 twice, under @temporalio/common and @temporalio/proto, because
 * the top level holds grpc's protobufjs 7; the decoder must be the copy the message types were built with.)
 */
function historyFromCliJson(json: unknown): unknown {
  const protobufjsOfProto = path.dirname(require.resolve('@temporalio/proto/package.json'));
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const { fromJson } = require(require.resolve('protobufjs/ext/protojson', { paths: [protobufjsOfProto] })) as {
    fromJson(type: unknown, json: unknown, opts: object): unknown;
  };
  const root = patchProtobufRoot(proto) as unknown as { lookupType(name: string): unknown };
  const historyType = root.lookupType('temporal.api.history.v1.History');
  return fromJson(historyType, json, { ignoreUnknownFields: true });
}
const histories = fs
  .readdirSync(dir)
  .filter((f) => f.endsWith('.json'))
  .sort();

let workflowBundle: Awaited<ReturnType<typeof bundleWorkflowCode>>;
/** The same workflow code with the OpenTelemetry workflow interceptors, as a worker bundles it while tracing is on. */
let tracedBundle: Awaited<ReturnType<typeof bundleWorkflowCode>>;
const otelInterceptors = require.resolve('@temporalio/interceptors-opentelemetry/lib/workflow-interceptors');
beforeAll(async () => {
  // The replay workers' lines go where the gateway's go (quiet unless a test fails).
  installRuntime(process.env.LOG_LEVEL ?? 'warn');
  const logger = { trace() {}, debug() {}, info() {}, warn() {}, error() {}, log() {} } as never;
  [workflowBundle, tracedBundle] = await Promise.all([
    bundleWorkflowCode({ workflowsPath: require.resolve('../../workflows'), logger }),
    bundleWorkflowCode({
      workflowsPath: require.resolve('../../workflows'),
      workflowInterceptorModules: [otelInterceptors],
      logger,
    }),
  ]);
}, 120_000);

test('there are histories to replay', () => {
  expect(histories.length).toBeGreaterThanOrEqual(4);
});

test.each(histories)('%s replays on this build without nondeterminism', async (file) => {
  const history = historyFromCliJson(JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')));
  await Worker.runReplayHistory({ workflowBundle }, history, `replay-${file}`);
});

test.each(histories)(
  '%s replays with the tracing interceptors (a worker with OTEL_* set) without nondeterminism',
  async (file) => {
    const history = historyFromCliJson(JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8')));
    const sinks = { exporter: { export: { fn: () => undefined } } };
    await Worker.runReplayHistory(
      { workflowBundle: tracedBundle, interceptors: { workflowModules: [otelInterceptors] }, sinks },
      history,
      `replay-traced-${file}`,
    );
  },
);

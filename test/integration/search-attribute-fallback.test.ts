import { randomUUID } from 'node:crypto';
import { Client, Connection } from '@temporalio/client';
import { msToTs } from '@temporalio/common/lib/time';
import { startJobWorkflow, type JobWorkflowStart } from '../../src/jobs/workflowStart';

/**
 * A namespace set up without the gateway's search attributes (an operator's own Temporal) still runs jobs: the
 * first start is refused for the attributes, the job's workflow starts without them, and a second start of the
 * same id is 'exists'. Against the shared dev server, in a namespace of this test's own.
 */

let connection: Connection;
let client: Client;

beforeAll(async () => {
  connection = await Connection.connect({ address: process.env.TEMPORAL_ADDRESS! });
  const namespace = `no-attributes-${randomUUID()}`;
  await connection.workflowService.registerNamespace({
    namespace,
    workflowExecutionRetentionPeriod: msToTs('1 day'),
  });
  client = new Client({ connection, namespace });
});

afterAll(async () => {
  await connection?.close();
});

test('a namespace without the search attributes: the workflow starts without them, once', async () => {
  const inputs: (string | null)[] = [];
  const s: JobWorkflowStart = {
    workflowType: 'videoJobWorkflow',
    taskQueue: `no-worker-${randomUUID()}`,
    workflowId: `video-${randomUUID()}`,
    input: (statusAttribute) => {
      inputs.push(statusAttribute);
      return { statusSearchAttribute: statusAttribute };
    },
    accountId: 'acct',
    model: 'veo-3.1-generate-preview',
    status: 'submitted',
  };
  expect(await startJobWorkflow(client, s)).toBe('started');
  // Tried with the status attribute, then started without it: the workflow is told not to keep it current.
  expect(inputs).toEqual(['GatewayJobStatus', null]);
  const d = await client.workflow.getHandle(s.workflowId).describe();
  expect(d.status.name).toBe('RUNNING');
  expect(d.searchAttributes).toEqual({});
  expect(await startJobWorkflow(client, s)).toBe('exists');
  await client.workflow.getHandle(s.workflowId).terminate('test over');
});

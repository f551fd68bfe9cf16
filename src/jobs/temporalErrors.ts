/**
 * Temporal SDK errors recognised by name: the SDK marks each error class's prototype with its name, so the API can
 * tell them apart without importing @temporalio/client (about 25 MB of gRPC and protobuf code) on start-up; it is
 * loaded only when the API connects to Temporal.
 */
export function isTemporalError(
  e: unknown,
  name: 'WorkflowNotFoundError' | 'WorkflowExecutionAlreadyStartedError',
): boolean {
  return (e as { name?: unknown } | null)?.name === name;
}

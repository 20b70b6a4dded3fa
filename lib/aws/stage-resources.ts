/**
 * The table and queue names serverless.yml gives a stage (`custom.names`), so the operator CLI,
 * the local services and `npm run local -- --keep-running` name things as a deployment does.
 * test/deploy/template.test.ts holds this to the packaged template.
 */
export function stageResourceNames(stage: string) {
  const prefix = `choria-provisioner-${stage}`;
  return {
    leaseTable: `${prefix}-lease`,
    admissionTable: `${prefix}-admission`,
    hostWorkQueue: `${prefix}-host-work`,
    hostWorkDlq: `${prefix}-host-work-dlq`,
    lifecycleQueue: `${prefix}-lifecycle`,
    lifecycleDlq: `${prefix}-lifecycle-dlq`,
  };
}

/**
 * IAM decisions evaluated offline by @cloud-copilot/iam-simulate: one identity policy, one
 * principal with its context keys (aws:username, principal tags), one request, and the
 * resource's own policy where it has one (a KMS key's key policy).
 */
import { runSimulation } from '@cloud-copilot/iam-simulate';

export const ACCOUNT = '123456789012';

export interface Who {
  label: string;
  principal: string;
  context: Record<string, string>;
}

export interface Request {
  action: string;
  resource: string;
  context?: Record<string, string>;
}

/** `Allowed`, `ExplicitlyDenied`, `ImplicitlyDenied`, or `error: ...` when the simulation refused the input. */
export async function decision(policy: unknown, who: Who, r: Request, resourcePolicy?: unknown): Promise<string> {
  const res = await runSimulation(
    {
      identityPolicies: [{ name: 'policy', policy: policy as never }],
      serviceControlPolicies: [],
      resourceControlPolicies: [],
      ...(resourcePolicy ? { resourcePolicy } : {}),
      request: { action: r.action, principal: who.principal, resource: { resource: r.resource, accountId: ACCOUNT }, contextVariables: { ...who.context, ...(r.context ?? {}) } },
    },
    {},
  );
  if (res.resultType === 'error') return `error: ${JSON.stringify(res.errors)}`;
  return res.overallResult;
}

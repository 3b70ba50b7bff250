import { ConfigError } from '../errors.js';
import { MODEL_ROLES } from '../models/model-registry.js';

/** `--model-role untrusted=sonnet` sets the config key models.aliases.untrusted. */
export function modelRoleOverrides(roles: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [role, model] of Object.entries(roles)) {
    if (!(MODEL_ROLES as readonly string[]).includes(role)) {
      throw new ConfigError(`--model-role ${role}=${model}: unknown role "${role}"; roles: ${MODEL_ROLES.join(', ')}`);
    }
    if (!model.trim()) throw new ConfigError(`--model-role ${role}= needs a model or alias`);
    out[`models.aliases.${role}`] = model.trim();
  }
  return out;
}

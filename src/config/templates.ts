// Substitutes `${{ env.VAR }}` templates in webhook header values once, at startup. Only variables
// whose name starts with the configured prefix may be referenced; a missing one stops startup.

const TEMPLATE = /\$\{\{\s*env\.([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g;

export type TemplateResult = { ok: true; value: string } | { ok: false; problems: string[] };

export function resolveEnvTemplates(value: string, env: Readonly<Record<string, string | undefined>>, envPrefix: string): TemplateResult {
  const problems: string[] = [];
  const resolved = value.replace(TEMPLATE, (whole: string, name: string) => {
    if (!name.startsWith(envPrefix)) {
      problems.push(`template ${whole} references ${name}, which does not start with the allowed prefix "${envPrefix}" (webhooks.env_prefix)`);
      return "";
    }
    const v = env[name];
    if (v === undefined) {
      problems.push(`environment variable ${name} is not set (referenced by ${whole})`);
      return "";
    }
    return v;
  });
  // Anything template-like left over was not of the form `${{ env.NAME }}`.
  const leftover = /\$\{\{.*?(\}\}|$)/.exec(value.replace(TEMPLATE, ""));
  if (leftover) problems.push(`malformed template ${JSON.stringify(leftover[0])}; expected \${{ env.NAME }}`);
  return problems.length > 0 ? { ok: false, problems } : { ok: true, value: resolved };
}

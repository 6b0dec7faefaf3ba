// `troupe control-plane`: parses its flags, starts the control plane with the auth modules plugged
// in (API keys, tenants, token records; src/control-plane/auth/wiring.ts) and stops it (draining
// every deployment server) on SIGINT/SIGTERM. Called from src/cli.ts.
import { parseArgs } from "node:util";
import { join, resolve } from "node:path";
import { startControlPlane } from "./server.ts";
import { configureLogging } from "../log/logger.ts";
import { resolveLogOptions } from "../log/options.ts";
import { controlPlaneAuth } from "./auth/wiring.ts"; // auth
import { trustedProxiesFrom, UsageError } from "../cli-usage.ts";
import { RUNTIME_DEFAULTS as D } from "../config/runtime-defaults.ts";

export async function runControlPlaneCommand(args: string[]): Promise<void> {
  const { values } = parseArgs({
    args,
    options: {
      port: { type: "string" },
      host: { type: "string" },
      "data-dir": { type: "string" },
      region: { type: "string" },
      "trusted-proxies": { type: "string" },
      "projects-root": { type: "string" },
      "shared-projects": { type: "boolean" },
    },
    strict: true,
  });
  const port = values.port === undefined ? D.controlPlanePort : Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port must be an integer 0-65535, got "${values.port}"`);
  const region = values.region ?? "us";
  if (region !== "us" && region !== "eu") throw new UsageError(`--region must be us or eu, got "${region}"`);
  const off = process.env.TROUPE_RATE_LIMIT === "off";
  const dataDir = resolve(values["data-dir"] ?? D.controlPlaneDataDir);
  const auth = controlPlaneAuth(dataDir);
  const logOptions = resolveLogOptions({ level: null, format: null, requestsPerSecond: 0 }, process.env, false);
  configureLogging(logOptions, "control-plane");
  const cp = await startControlPlane({
    host: values.host ?? D.loopbackHost,
    port,
    dataDir,
    region,
    rateLimit: off ? null : { region },
    guards: auth.guards,
    verifiesKey: auth.verifiesKey,
    projects: {
      root: resolve(values["projects-root"] ?? process.env.TROUPE_PROJECTS_ROOT ?? join(dataDir, "projects")),
      perTenant: !values["shared-projects"],
    },
    trustedProxies: trustedProxiesFrom(values["trusted-proxies"]),
    extraRoutes: auth.extraRoutes,
    deployments: { rateLimit: off ? "off" : region, args: auth.deploymentArgs },
  });
  // The line tests and scripts wait for: keep its format stable.
  process.stdout.write(`troupe control plane listening on ${cp.url}\n`);
  const stop = () => {
    void cp.close().then(() => process.exit(0));
  };
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}

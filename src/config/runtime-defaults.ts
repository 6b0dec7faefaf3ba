// Defaults of the command line and the servers it starts, in one place: the CLI's help text, its
// flag parsing and startServer/startControlPlane (for programmatic callers) all read these.

export const RUNTIME_DEFAULTS = {
  /** the SDK's default deployment URL is http://localhost:8123 */
  port: 8123,
  /** `troupe serve` binds every interface; `troupe dev` and programmatic servers only loopback */
  serveHost: "0.0.0.0",
  loopbackHost: "127.0.0.1",
  dataDir: ".troupe-data",
  controlPlanePort: 8124,
  controlPlaneDataDir: ".troupe-control-plane",
  /** how long a draining server lets running runs finish (SIGTERM, rollover) */
  shutdownGraceMs: 10_000,
} as const;

/** The host to dial a server bound to `bindHost` at, as a URL writes it (every interface: loopback; IPv6 in brackets). */
export const urlHostOf = (bindHost: string): string =>
  bindHost === RUNTIME_DEFAULTS.serveHost ? RUNTIME_DEFAULTS.loopbackHost : bindHost.includes(":") ? `[${bindHost}]` : bindHost;

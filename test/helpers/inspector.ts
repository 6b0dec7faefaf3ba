// The Chrome DevTools protocol of a spawned server (started with NODE_OPTIONS=--inspect=127.0.0.1:0),
// over the WebSocket the process prints, and of its worker threads (the NodeWorker domain): a test
// pauses a worker at a line of our compiled code and resumes it, to hold what that thread would
// post next for as long as it needs — a window that is otherwise a microsecond wide. No hook in
// the server: the code under test runs as users run it.

interface Pending {
  resolve(result: unknown): void;
  reject(err: Error): void;
}

type Listener = (params: Record<string, unknown>) => void;

/** One protocol session: the process's own, or a worker's (messages wrapped in NodeWorker.sendMessageToWorker). */
class Session {
  private nextId = 1;
  private readonly pending = new Map<number, Pending>();
  private readonly listeners = new Map<string, Set<Listener>>();

  constructor(private readonly post: (message: string) => void) {}

  send<T = Record<string, unknown>>(method: string, params: object = {}): Promise<T> {
    const id = this.nextId++;
    return new Promise<T>((resolve, reject) => {
      this.pending.set(id, { resolve: resolve as (r: unknown) => void, reject });
      this.post(JSON.stringify({ id, method, params }));
    });
  }

  on(method: string, listener: Listener): () => void {
    let set = this.listeners.get(method);
    if (set === undefined) this.listeners.set(method, (set = new Set()));
    set.add(listener);
    return () => set.delete(listener);
  }

  /** The next `method` event whose params `match`. */
  next(method: string, match: (params: Record<string, unknown>) => boolean = () => true): Promise<Record<string, unknown>> {
    return new Promise((resolve) => {
      const off = this.on(method, (params) => {
        if (!match(params)) return;
        off();
        resolve(params);
      });
    });
  }

  received(text: string): void {
    const m = JSON.parse(text) as { id?: number; result?: unknown; error?: { message: string }; method?: string; params?: Record<string, unknown> };
    if (m.id !== undefined) {
      const p = this.pending.get(m.id);
      this.pending.delete(m.id);
      if (m.error) p?.reject(new Error(m.error.message));
      else p?.resolve(m.result);
      return;
    }
    for (const l of this.listeners.get(m.method ?? "") ?? []) l(m.params ?? {});
  }
}

export interface WorkerSession {
  /** the worker's title and url as the inspector names them */
  title: string;
  session: Session;
}

export class ServerInspector {
  private readonly main: Session;

  private constructor(private readonly socket: WebSocket) {
    this.main = new Session((m) => socket.send(m));
    socket.addEventListener("message", (e) => this.main.received(String(e.data)));
  }

  /** Connects to the inspector a server process announced in its output ("Debugger listening on ws://…"). */
  static async connect(serverOutput: string): Promise<ServerInspector> {
    const url = /Debugger listening on (ws:\/\/\S+)/.exec(serverOutput)?.[1];
    if (url === undefined) throw new Error(`the server announced no inspector:\n${serverOutput}`);
    const socket = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener("open", () => resolve(), { once: true });
      socket.addEventListener("error", () => reject(new Error(`inspector ${url} did not connect`)), { once: true });
    });
    return new ServerInspector(socket);
  }

  /** The process's worker threads, each with a protocol session of its own. */
  async workers(): Promise<WorkerSession[]> {
    const found: WorkerSession[] = [];
    const sessions = new Map<string, Session>();
    this.main.on("NodeWorker.receivedMessageFromWorker", (p) => sessions.get(p.sessionId as string)?.received(p.message as string));
    this.main.on("NodeWorker.attachedToWorker", (p) => {
      const sessionId = p.sessionId as string;
      const info = p.workerInfo as { title: string; url: string };
      const session = new Session((message) => void this.main.send("NodeWorker.sendMessageToWorker", { sessionId, message }));
      sessions.set(sessionId, session);
      found.push({ title: `${info.title} ${info.url}`, session });
    });
    // attachedToWorker is sent for every running worker before enable answers
    await this.main.send("NodeWorker.enable", { waitForDebuggerOnStart: false });
    return found;
  }

  close(): void {
    this.socket.close();
  }
}

/**
 * Sets a breakpoint, in every worker that loaded a script whose url matches `scriptUrl`, on the
 * first line of that script containing `anchor`, taken only when `condition` (a JS expression in
 * the paused frame) holds. Answers how many workers got it (0: no worker loaded such a script or
 * the anchor is not in it).
 */
export async function breakInWorkers(workers: WorkerSession[], scriptUrl: RegExp, anchor: string, condition: string): Promise<number> {
  let set = 0;
  for (const { session } of workers) {
    const scripts: { scriptId: string; url: string }[] = [];
    const off = session.on("Debugger.scriptParsed", (p) => void scripts.push({ scriptId: p.scriptId as string, url: p.url as string }));
    await session.send("Debugger.enable"); // scriptParsed is sent for every script already loaded before this answers
    off();
    for (const script of scripts.filter((s) => scriptUrl.test(s.url))) {
      const { scriptSource } = await session.send<{ scriptSource: string }>("Debugger.getScriptSource", { scriptId: script.scriptId });
      const lineNumber = scriptSource.split("\n").findIndex((line) => line.includes(anchor));
      if (lineNumber < 0) continue;
      await session.send("Debugger.setBreakpoint", { location: { scriptId: script.scriptId, lineNumber }, condition });
      set++;
    }
  }
  return set;
}

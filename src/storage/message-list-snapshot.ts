// What the message caches remember of the last list they saw in a conversation: the messages and
// the fields whose change means "edited in place" (id, content, the lc_kwargs object; that covers
// messagesStateReducer assigning a missing id). Kept as columns and updated in place, so a list
// that extends the previous one costs one comparison per kept message and no copy.

export interface MessageFields {
  id?: unknown;
  content?: unknown;
  lc_kwargs: unknown;
}

export class MessageListSnapshot {
  readonly messages: MessageFields[] = [];
  private readonly ids: unknown[] = [];
  private readonly contents: unknown[] = [];
  private readonly kwargs: unknown[] = [];

  get length(): number {
    return this.messages.length;
  }

  /** How many leading messages of `list` are the recorded ones, unchanged. */
  sharedPrefix(list: MessageFields[]): number {
    const n = Math.min(this.messages.length, list.length);
    for (let k = 0; k < n; k++) {
      const m = list[k];
      if (m !== this.messages[k] || m.id !== this.ids[k] || m.content !== this.contents[k] || m.lc_kwargs !== this.kwargs[k]) return k;
    }
    return n;
  }

  /** Keeps the first `kept` recorded messages and records `list` from there on. */
  record(list: MessageFields[], kept: number): void {
    for (const column of [this.messages, this.ids, this.contents, this.kwargs]) column.length = kept;
    for (let i = kept; i < list.length; i++) {
      const m = list[i];
      this.messages.push(m);
      this.ids.push(m.id);
      this.contents.push(m.content);
      this.kwargs.push(m.lc_kwargs);
    }
  }
}

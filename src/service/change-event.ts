/** What clients are told after a write, so `/sync` streams can wake up. */
export interface ChangeEvent {
  readonly user_id: string;
  readonly type: 'm.push_rules' | 'm.pushers';
  readonly version: number;
}

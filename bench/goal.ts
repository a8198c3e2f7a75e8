/** One row of the goals table (goals.ts): kept apart so the sections that compute goals need not import the table. */
export interface Goal {
  readonly goal: string;
  readonly figure: string;
  readonly met: string;
}

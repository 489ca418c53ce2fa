/**
 * The parameters of a SQL statement assembled from parts written in different files (the ingest
 * statement: quota checks, event, delivery and job). Each part asks for a value by name and gets
 * its `$n`; the call gives the values by name and `bind` puts them in placeholder order. The text
 * is built once, so a named prepared statement keeps its cached plan.
 */
export class NamedParams {
  private readonly order: string[] = [];

  /** The placeholder of `name` (the same each time it is asked for), with an optional cast. */
  $(name: string, cast?: string): string {
    let i = this.order.indexOf(name);
    if (i === -1) i = this.order.push(name) - 1;
    return cast ? `$${i + 1}::${cast}` : `$${i + 1}`;
  }

  /** The values in placeholder order; a name without a value is a programming error. */
  bind(values: Record<string, unknown>): unknown[] {
    return this.order.map((name) => {
      if (!Object.hasOwn(values, name)) throw new Error(`statement parameter ${name} has no value`);
      return values[name];
    });
  }
}

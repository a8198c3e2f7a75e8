/** `-o table|json|yaml` for the read commands. */
import { Option } from 'commander';
import { dump } from 'js-yaml';

export type OutputFormat = 'table' | 'json' | 'yaml';

export function outputOption(): Option {
  return new Option('-o, --output <format>', 'output format').choices(['table', 'json', 'yaml']).default('table');
}

/** JSON and YAML print the data; table prints the rows the caller made from it. */
export function print(format: OutputFormat, data: unknown, asTable: () => string): void {
  if (format === 'json') process.stdout.write(`${JSON.stringify(data, null, 2)}\n`);
  else if (format === 'yaml') process.stdout.write(dump(data, { noRefs: true, lineWidth: 120 }));
  else process.stdout.write(asTable());
}

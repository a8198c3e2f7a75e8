/** The demo Echo service, loaded from proto/ at the repository root. */
import * as grpc from '@grpc/grpc-js';
import * as protoLoader from '@grpc/proto-loader';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { CodedError } from '../domain/errors.js';

export interface WhoReply {
  backend_id: string;
  address: string;
  region: string;
  zone: string;
  subzone: string;
}

/** proto/ sits at the repository root; compiled code runs from dist/server/src/demo. */
function protoDir(): string {
  for (const up of ['../../../../proto/', '../../../proto/']) {
    const dir = fileURLToPath(new URL(up, import.meta.url));
    if (existsSync(`${dir}canopy/demo/v1/echo.proto`)) return dir;
  }
  throw new CodedError('CANOPY_BROKEN_INVARIANT', 'proto/canopy/demo/v1/echo.proto not found next to the build');
}

let ctor: grpc.ServiceClientConstructor | undefined;

export function echoService(): grpc.ServiceClientConstructor {
  if (ctor) return ctor;
  const def = protoLoader.loadSync('canopy/demo/v1/echo.proto', {
    includeDirs: [protoDir()],
    keepCase: true,
    defaults: true,
  });
  const pkg = grpc.loadPackageDefinition(def) as unknown as {
    canopy: { demo: { v1: { Echo: grpc.ServiceClientConstructor } } };
  };
  ctor = pkg.canopy.demo.v1.Echo;
  return ctor;
}

// Writes Envoy's parsed protos as a JSON descriptor into dist/ (see server/src/wire/protos.ts); run after tsc.
import { writeEnvoyDescriptor } from '../dist/server/src/wire/protos.js';

writeEnvoyDescriptor();

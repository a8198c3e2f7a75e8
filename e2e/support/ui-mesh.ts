/** The web view's size test and benchmark mesh: 10 regions × 5 zones × 10 subzones × 20 endpoints. */
export function bigService(name = 'big'): object {
  const endpoints = [];
  for (let r = 0; r < 10; r++)
    for (let z = 0; z < 5; z++)
      for (let s = 0; s < 10; s++)
        for (let e = 0; e < 20; e++)
          endpoints.push({
            address: `10.${r}.${z * 10 + s}.${e + 1}`,
            port: 80,
            locality: { region: `r${r}`, zone: `r${r}-z${z}`, subzone: `r${r}-z${z}-s${s}` },
          });
  return { name, endpoints };
}

/** Rows the tree draws: collapsed below zones (root, regions, zones) or every node open. */
export const BIG_ROWS = { collapsed: 1 + 10 + 50, open: 1 + 10 + 50 + 500 };

/**
 * The shape: 300 endpoints in 30 localities (3 regions × 2 zones × 5 subzones × 10), with
 * every endpoint of the last zone by name, r2/r2-z1, unhealthy and one subzone of r1/r1-z0 draining.
 */
export function midService(name = 'mid'): object {
  const endpoints = [];
  for (let r = 0; r < 3; r++)
    for (let z = 0; z < 2; z++)
      for (let s = 0; s < 5; s++)
        for (let e = 0; e < 10; e++) {
          const health = r === 2 && z === 1 ? 'unhealthy' : r === 1 && z === 0 && s === 2 ? 'draining' : 'healthy';
          endpoints.push({
            address: `10.${r}.${z * 10 + s}.${e + 1}`,
            port: 80,
            locality: { region: `r${r}`, zone: `r${r}-z${z}`, subzone: `r${r}-z${z}-s${s}` },
            health,
          });
        }
  return { name, endpoints };
}

/**
 * The two-region mesh the shared-encoding tests serve: one service, `echo`, with two zones in each of
 * `east` and `west`, so clients in the two regions get different CLAs and clients in one region the same.
 */
export const ECHO_REGIONS = ['east', 'west'];

export const echoMesh = () => ({
  services: [
    {
      name: 'echo',
      endpoints: [
        { address: '10.0.0.1', port: 80, locality: { region: 'east', zone: 'e1' } },
        { address: '10.0.0.2', port: 80, locality: { region: 'east', zone: 'e2' } },
        { address: '10.0.1.1', port: 80, locality: { region: 'west', zone: 'w1' } },
        { address: '10.0.1.2', port: 80, locality: { region: 'west', zone: 'w2' } },
      ],
    },
  ],
});
